"""A knob or flag typed wrong in `record`: "did you mean" from the target's own names.

The catalogs know the engines' names; the file knows the operator's (a custom knob, the
bundled engine's launch flags, a case slip of a name that is right there).  A name the
file lacks while a close one is in it is most likely a typo: setting it adds a new line
(a warning, as the catalogs' "unknown knob" is), unsetting it changes nothing (the
refusal names the close ones).
"""

from __future__ import annotations

from ledger.core.identifiers import split_place
from ledger.core.names import close_names


def file_names(tf) -> list[str]:
    """Every knob and flag name the target's file holds, in file order."""
    names = list(tf.values)
    if tf.summary is not None:
        names += [k.knob for k in tf.summary.knobs]
    return list(dict.fromkeys(names))


def did_you_mean(tf, knob: str) -> str:
    """`` (did you mean X (line 16)?)`` for a name the file lacks; "" when it has it or
    nothing in it is close."""
    name = split_place(knob)[0]
    names = file_names(tf)
    if name in names:
        return ""
    close = close_names(name, names)
    if not close:
        return ""
    shown = []
    for c in close:
        found = tf.summary.get(c) if tf.summary is not None else None
        lines = sorted({p.line for p in found.places}) if found is not None else []
        where = f" (line {', '.join(map(str, lines))})" if lines else ""
        shown.append(f"{c}{where}")
    return f" (did you mean {' or '.join(shown)}?)"


def new_name_warnings(tf, knob: str, value: str | None) -> list[str]:
    """A warning when setting ``knob`` adds a name close to one the file already has."""
    hint = did_you_mean(tf, knob) if value is not None else ""
    if not hint:
        return []
    return [f"{split_place(knob)[0]} is not in {tf.target.name}{hint}: recording it adds "
            "a new one"]


__all__ = ["did_you_mean", "file_names", "new_name_warnings"]
