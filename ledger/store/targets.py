"""Managed config files, read and edited through the ``envknobs`` formats.

The files are decoded as UTF-8 with ``surrogateescape`` so that any byte sequence comes
back out exactly as it went in: a file the ledger does not change is never rewritten,
and a file it changes differs only in the lines of the knobs it set.

Value sources: the YAML formats (k8s, yaml-map) tell the exact text a value is written
with (:func:`source_in`); an entry keeps the text before and after its change, and an edit
given a source writes it back verbatim (``value: $HF_TOKEN`` comes back as it was, not as
``"$HF_TOKEN"``), falling back to rendering the value where the text no longer fits.

Flag catalogs: a yaml-map target with ``flags: sglang|vllm`` is an engine ``--config``
file; ``record knob`` checks its keys against that engine's flag catalog (see
:func:`ledger.commands.record.check_config_key`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from envknobs.registry import KnobError
from ledger.core.layout import add_knob
from ledger.core.layout import anchor_for
from ledger.core.model import Target
from ledger.errors import InvalidValue
from ledger.errors import TargetError
from ledger.store.workspace import Workspace
from ledger.store.workspace import check_target_file

ENCODING = "utf-8"
ERRORS = "surrogateescape"


@dataclass(frozen=True)
class TargetFile:
    target: Target
    path: Path
    raw: bytes
    values: dict[str, str]

    @property
    def text(self) -> str:
        return self.raw.decode(ENCODING, ERRORS)


def anchor_in(
    tf: TargetFile, text: str, knob: str, managed: Mapping[str, dict | None] | None = None
) -> dict | None:
    """Where ``knob`` sits in ``text`` (a version of ``tf`` holding it), for re-adding it later.

    ``managed``: the target's other ledger knobs and their anchors (see :mod:`ledger.core.layout`).
    """
    from envknobs.formats import FormatError

    fmt = _format(tf.target)
    try:
        return anchor_for(fmt, text, knob, fmt.parse(text), managed or {})
    except (FormatError, KnobError):
        return None


def _format(target: Target):
    from envknobs.formats import get_format

    if target.format == "yaml-map":
        # Keys are checked against the flag catalog when recorded (with --no-validate
        # to bypass it), not on every edit: a revert must never be refused for its key.
        # Without flags the map is an env map: the process gets strings.
        return get_format("yaml-map", key_path=target.key_path, strings=not target.flags)
    return get_format(target.format, container=target.container)


def format_of(target: Target):
    """The envknobs format object of ``target`` (FormatError for a bad setting)."""
    return _format(target)


def source_in(target: Target, text: str, knob: str) -> str | None:
    """The exact text ``knob``'s value is written with in ``text`` (None: absent, or a
    format that does not keep it)."""
    from envknobs.formats import FormatError

    fmt = _format(target)
    if not hasattr(fmt, "source"):
        return None
    try:
        return fmt.source(text, knob)
    except (FormatError, KnobError):
        return None


def _message(e: Exception, path: Path) -> str:
    render = getattr(e, "render", None)  # container candidates, placed as FILE:LINE
    return render(str(path)) if callable(render) else str(e)


def read_target(ws: Workspace, target: Target) -> TargetFile:
    """Read and parse one target file; errors name the file."""
    from envknobs.formats import FormatError

    path = ws.target_path(target)
    check_target_file(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TargetError(str(path), f"cannot read: {e.strerror}") from e
    try:
        values = _format(target).parse(raw.decode(ENCODING, ERRORS))
    except FormatError as e:
        raise TargetError(str(path), _message(e, path)) from e
    return TargetFile(target, path, raw, values)


def edit_target(
    tf: TargetFile, edits: Mapping[str, str | None],
    anchors: Mapping[str, dict | None] | None = None,
    sources: Mapping[str, str | None] | None = None,
    lines: Mapping[str, str | None] | None = None,
) -> bytes:
    """The file's bytes with each knob in ``edits`` set (or unset, for None).

    Removals go first, then changes in place, then knobs that are absent, in the order
    given, each put back at its anchor when it has one (see :mod:`ledger.core.layout`).
    ``sources``: the exact text to write for a knob's value, where the format keeps it;
    ``lines``: the exact lines a re-added knob had (see :func:`ledger.core.layout.add_knob`).
    """
    from envknobs.formats import FormatError

    fmt = _format(tf.target)
    text = tf.text
    present = tf.values
    removals = [k for k, v in edits.items() if v is None]
    changes = [k for k, v in edits.items() if v is not None and k in present]
    additions = [k for k, v in edits.items() if v is not None and k not in present]
    try:
        for knob in removals:
            text = fmt.unset(text, knob)
        for knob in changes:
            text = _set(fmt, text, knob, edits[knob], (sources or {}).get(knob))
        for knob in additions:
            text = add_knob(fmt, text, knob, edits[knob], anchors or {},
                            source=(sources or {}).get(knob), lines=(lines or {}).get(knob))
    except FormatError as e:
        raise TargetError(str(tf.path), _message(e, tf.path)) from e
    except KnobError as e:
        raise InvalidValue(f"{tf.path}: {e}") from e
    return text.encode(ENCODING, ERRORS)


def _set(fmt, text: str, knob: str, value: str, source: str | None) -> str:
    if source is not None and hasattr(fmt, "source"):
        return fmt.set(text, knob, value, source=source)
    return fmt.set(text, knob, value)
