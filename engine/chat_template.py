"""Chat messages to a prompt: the checkpoint's chat template when it has one, else a plain one.

A checkpoint's template is read from ``chat_template.jinja`` (what transformers writes since
4.43) or else ``tokenizer_config.json``'s ``chat_template`` (a string, or a list of named
templates of which ``default`` is taken).  It is rendered as transformers'
``apply_chat_template(messages, add_generation_prompt=True)`` renders it: a sandboxed
jinja2 environment with ``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols``
extension, ``raise_exception``, ``strftime_now`` and a ``tojson`` that keeps non-ASCII
text, and the tokenizer's special tokens (``bos_token``, ``eos_token``, ...) as variables.
The engine does this itself with jinja2 so that it needs no transformers; the tests hold it
to transformers' own ``apply_chat_template`` on the same checkpoint.  The rendered text is
then tokenized without adding special tokens (the template writes them), as transformers
does.

Without a template (the byte tokenizer of the presets, or a checkpoint that has none) the
plain template :data:`PLAIN_TEMPLATE` is used: each message as ``<role>: <content>`` and a
newline, then ``assistant:`` for the model to continue; that text is tokenized as a
completion prompt would be (the tokenizer's usual BOS included).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.config import EngineError

PLAIN_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                      "cls_token", "mask_token")


class ChatTemplate:
    """One compiled template and the variables it is rendered with."""

    def __init__(self, source: str, special_tokens: dict[str, str] | None = None,
                 origin: str = "plain") -> None:
        self.source = source
        self.origin = origin  # a file path, or "plain"
        self.special_tokens = dict(special_tokens or {})
        try:
            self._template = _environment().from_string(source)
        except Exception as e:  # noqa: BLE001 - jinja2's syntax errors, named with the file
            raise EngineError(f"{origin}: the chat template does not compile: {e}") from e

    @property
    def is_plain(self) -> bool:
        return self.origin == "plain"

    def render(self, messages: list[dict[str, Any]]) -> str:
        """The prompt text; a template's refusal (``raise_exception``, an undefined
        variable) becomes an :class:`EngineError` naming the template."""
        import jinja2

        try:
            return self._template.render(messages=messages, add_generation_prompt=True,
                                         **self.special_tokens)
        except jinja2.TemplateError as e:
            raise EngineError(f"the chat template ({self.origin}) refused the messages: "
                              f"{e}") from None


def load_chat_template(model_dir: str | Path | None) -> ChatTemplate:
    """The checkpoint's template (see the module doc), else the plain one."""
    if not model_dir:
        return ChatTemplate(PLAIN_TEMPLATE)
    root = Path(model_dir)
    config = _read_json(root / "tokenizer_config.json")
    special = {key: text for key in SPECIAL_TOKEN_KEYS
               if (text := _token_text(config.get(key))) is not None}
    jinja_file = root / "chat_template.jinja"
    if jinja_file.is_file():
        return ChatTemplate(jinja_file.read_text(encoding="utf-8"), special, str(jinja_file))
    source = config.get("chat_template")
    if source is None:
        return ChatTemplate(PLAIN_TEMPLATE)
    origin = str(root / "tokenizer_config.json")
    if isinstance(source, list):
        named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
        if "default" not in named:
            raise EngineError(f"{origin}: chat_template lists {sorted(map(str, named))} but "
                              "no 'default' template: the engine serves the default one")
        source = named["default"]
    if not isinstance(source, str):
        raise EngineError(f"{origin}: chat_template must be a string or a list of named "
                          "templates")
    return ChatTemplate(source, special, origin)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise EngineError(f"{path}: not readable JSON: {e}") from e
    return data if isinstance(data, dict) else {}


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _environment() -> Any:
    """The sandbox transformers renders chat templates in (see the module doc)."""
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
               separators: Any = None, sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    class Generation(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}`` (transformers marks assistant tokens
        with it for training masks): rendered as its body."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body
                                          ).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return caller()

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env
