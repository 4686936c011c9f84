"""Tokenizers: byte-level by default, ``tokenizer.json`` (``tokenizers`` package) when present."""

from __future__ import annotations

from pathlib import Path

from engine.config import EngineError

BOS_ID = 256
EOS_ID = 257


class ByteTokenizer:
    """UTF-8 bytes are token ids 0..255; 256 is BOS, 257 is EOS (vocab 258)."""

    bos_id = BOS_ID
    eos_id: int | None = EOS_ID

    def encode(self, text: str) -> list[int]:
        return [BOS_ID, *text.encode("utf-8")]

    def decode(self, ids: list[int]) -> str:
        # Ids past the byte range (specials, or a larger random-preset vocab) map into
        # bytes so any output is printable; invalid UTF-8 is replaced, not raised.
        return bytes(i % 256 for i in ids if i not in (BOS_ID, EOS_ID)).decode(
            "utf-8", errors="replace")


class HFTokenizer:
    """A ``tokenizer.json`` loaded with the ``tokenizers`` package."""

    def __init__(self, path: Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise EngineError(f"{path} needs the 'tokenizers' package") from e
        self._tok = Tokenizer.from_file(str(path))
        self.eos_id = None

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids)


def load_tokenizer(model_dir: str | None) -> ByteTokenizer | HFTokenizer:
    if model_dir:
        path = Path(model_dir) / "tokenizer.json"
        if path.is_file():
            return HFTokenizer(path)
    return ByteTokenizer()
