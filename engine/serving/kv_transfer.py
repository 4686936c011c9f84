"""Wire format of a KV transfer: a length-prefixed JSON header, then raw tensor bytes.

Tokens, not pages, are shipped, so prefill and decode workers may use different page
sizes.  Raw bytes keep bfloat16 exact (numpy has no bfloat16).
"""

from __future__ import annotations

import json
import struct

import torch

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def encode_kv(room: int, first_token: int, prefill_ttft_s: float, kv: torch.Tensor) -> bytes:
    """kv: [layers, 2, tokens, Hkv, D] -> bytes."""
    kv = kv.contiguous()
    header = json.dumps({"room": room, "first_token": first_token, "ttft": prefill_ttft_s,
                         "shape": list(kv.shape),
                         "dtype": str(kv.dtype).replace("torch.", "")}).encode()
    return struct.pack("<I", len(header)) + header + kv.view(torch.uint8).numpy().tobytes()


def decode_kv(data: bytes) -> tuple[int, int, float, torch.Tensor]:
    """Inverse of :func:`encode_kv`; raises ValueError on anything malformed."""
    if len(data) < 4:
        raise ValueError("truncated header")
    (n,) = struct.unpack("<I", data[:4])
    try:
        header = json.loads(data[4:4 + n])
        dtype = _DTYPES[header["dtype"]]
        shape = [int(x) for x in header["shape"]]
        room, first = int(header["room"]), int(header["first_token"])
        ttft = float(header.get("ttft", 0.0))
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"bad header: {e}") from None
    if len(shape) != 5:
        raise ValueError("KV must be [layers, 2, tokens, heads, dim]")
    payload = bytearray(data[4 + n:])
    expected = dtype.itemsize
    for s in shape:
        expected *= s
    if len(payload) != expected:
        raise ValueError(f"payload has {len(payload)} bytes, header says {expected}")
    kv = torch.frombuffer(payload, dtype=dtype).view(shape) if expected else \
        torch.empty(shape, dtype=dtype)
    return room, first, ttft, kv
