"""Tokenizers: byte-level by default, ``tokenizer.json`` (``tokenizers`` package) when present."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.chat_template import PLAIN_TEMPLATE
from engine.chat_template import ChatTemplate
from engine.chat_template import load_chat_template
from engine.config import EngineError

BOS_ID = 256
EOS_ID = 257


class ChatPrompts:
    """What both tokenizers share: a conversation's prompt ids (engine.chat_template)."""

    chat_template: ChatTemplate

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        raise NotImplementedError

    def apply_chat_template(self, messages: list[dict[str, Any]]) -> list[int]:
        """Ids ready for the assistant's turn: a checkpoint's template writes its own
        special tokens; the plain template's text is tokenized as a completion prompt."""
        template = self.chat_template
        return self.encode(template.render(messages), add_special_tokens=template.is_plain)


class ByteTokenizer(ChatPrompts):
    """UTF-8 bytes are token ids 0..255; 256 is BOS, 257 is EOS (vocab 258)."""

    bos_id = BOS_ID
    eos_id: int | None = EOS_ID

    def __init__(self) -> None:
        self.chat_template = ChatTemplate(PLAIN_TEMPLATE)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [BOS_ID, *ids] if add_special_tokens else ids

    def decode(self, ids: list[int]) -> str:
        # Ids past the byte range (specials, or a larger random-preset vocab) map into
        # bytes so any output is printable; invalid UTF-8 is replaced, not raised.
        return bytes(i % 256 for i in ids if i not in (BOS_ID, EOS_ID)).decode(
            "utf-8", errors="replace")


class HFTokenizer(ChatPrompts):
    """A ``tokenizer.json`` loaded with the ``tokenizers`` package."""

    def __init__(self, path: Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise EngineError(f"{path} needs the 'tokenizers' package") from e
        self._tok = Tokenizer.from_file(str(path))
        self.eos_id = None
        self.chat_template = load_chat_template(path.parent)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids)


def load_tokenizer(model_dir: str | None) -> ByteTokenizer | HFTokenizer:
    if model_dir:
        path = Path(model_dir) / "tokenizer.json"
        if path.is_file():
            return HFTokenizer(path)
    return ByteTokenizer()
