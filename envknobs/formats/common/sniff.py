"""Refuse a file given as the wrong format, naming the format to use.

A systemd unit, a Kubernetes manifest, a docker-compose file or a Helm values file given
as ``dotenv`` or ``bash`` reads as a file with no knobs, and a ``record knob`` would
append a ``K=V`` / ``export K=V`` line that the real reader (systemd, kubectl, compose,
Helm) never sees, while the ledger says ``ok``.  The line-based formats therefore sniff
the content first and raise :class:`WrongFormat` where it is plainly something else:

* a **systemd unit**: its first content line is a section header (``[Unit]``,
  ``[Service]``, ...).  Only the first content line counts, so a setup script writing a
  unit through a here-document is still a script;
* a **YAML document**: the text loads (PyYAML, every document) as a mapping with
  structure -- nested collections, or two keys or more -- or a sequence of collections,
  and (for dotenv) some content line is not a ``K=V`` binding.  A dotenv file
  ``A=foo: bar`` or a one-line script stays what it was said to be.  The message says
  which YAML it is: a Kubernetes manifest (``kind``/``apiVersion``: ``--format k8s``), a
  compose file (``services:``: ``--format yaml-map --key-path
  services.NAME.environment``), or another map (``--format yaml-map --key-path PATH``).

The sniff is cheap for the files it passes: YAML is only loaded when some line looks like
a YAML key (``key:``), a list item (``- x``) or a document marker.
"""

from __future__ import annotations

import functools
import re

from envknobs.formats.common import FormatError
from envknobs.formats.common.text import MAX_NESTING

_SECTION = re.compile(
    r"[ \t]*\[(Unit|Service|Install|Socket|Timer|Path|Mount|Automount|Swap|Slice|Scope)\][ \t]*\Z"
)
_ENV_FILE = re.compile(r"^[ \t]*EnvironmentFile[ \t]*=[ \t]*-?([^\r\n]*?)[ \t]*$", re.M)
_YAMLISH = re.compile(r"^[ \t]*(?:-[ \t]+\S|-$|[A-Za-z_][\w.-]*:(?:[ \t]|$)|---(?:[ \t]|$))", re.M)


class WrongFormat(FormatError):
    """The file's content is another format than the target's (the message says which
    one to use)."""


def might_be_foreign(text: str) -> bool:
    """A cheap test: False when :func:`foreign_content` is sure to find nothing."""
    return _YAMLISH.search(text) is not None or _systemd_section(text) is not None


def _content_lines(text: str):
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            yield n, line


def _systemd_section(text: str) -> tuple[int, str] | None:
    first = next(_content_lines(text), None)
    if first is not None and _SECTION.match(first[1]):
        return first[0], first[1].strip()
    return None


def _structured(doc: object) -> bool:
    if isinstance(doc, dict):
        return len(doc) >= 2 or any(isinstance(v, (dict, list)) for v in doc.values())
    if isinstance(doc, list):
        return any(isinstance(v, (dict, list)) for v in doc)
    return False


LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"  # libyaml's own limit (1000 levels)


class _TooDeep(int):
    """The line where a YAML text nests deeper than :data:`MAX_NESTING`."""


def _too_deep(yaml, text: str, loader) -> _TooDeep | None:
    """Where ``text``'s YAML nests past the limit every reader has, from the parser's
    events (a loop, not the composer's recursion); None when it does not."""
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_NESTING:
                return _TooDeep(event.start_mark.line + 1)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return None


def _yaml_docs(text: str) -> list[object] | None:
    """The YAML documents of ``text`` when it is structured YAML, else None; for YAML
    nested too deeply to read, ``[_TooDeep(line)]``."""
    if not _YAMLISH.search(text):
        return None
    import yaml  # PyYAML: the reader kubectl-like tools and compose use (YAML 1.1)

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        deep = _too_deep(yaml, text, loader)
        if deep is not None:
            return [deep]
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.MarkedYAMLError as e:
        if e.problem == LIBYAML_TOO_DEEP and e.problem_mark is not None:
            return [_TooDeep(e.problem_mark.line + 1)]  # its scanner looked ahead that far
        return None
    except yaml.YAMLError:
        return None
    except (ValueError, TypeError, RecursionError):  # odd scalars PyYAML cannot build
        return None
    return docs if docs and any(_structured(d) for d in docs) else None


def _yaml_advice(docs: list[object]) -> str:
    maps = [d for d in docs if isinstance(d, dict)]
    if any("kind" in d and "apiVersion" in d for d in maps):
        return ("a Kubernetes manifest: use --format k8s --container NAME "
                "(its container's env: list)")
    services = next((d["services"] for d in maps if isinstance(d.get("services"), dict)), None)
    if services:
        names = ", ".join(str(n) for n in list(services)[:6])
        return (f"a docker-compose file (services: {names}): use --format yaml-map "
                "--key-path services.NAME.environment")
    return "a YAML file: use --format yaml-map (--key-path PATH for a map inside it)"


@functools.lru_cache(maxsize=64)
def foreign_content(text: str, fmt: str, bindings: tuple[int, ...] = ()) -> str | None:
    """Why ``text`` is not a ``fmt`` file (None: it may well be one).

    ``bindings``: for dotenv, the line numbers python-dotenv reads a ``K=V`` from; a
    file whose content lines are all bindings is a dotenv file whatever YAML thinks."""
    section = _systemd_section(text)
    if section is not None:
        line, header = section
        files = _ENV_FILE.findall(text)
        named = (f"the file its EnvironmentFile= names ({', '.join(f.strip() for f in files)})"
                 if files else "an EnvironmentFile= it reads")
        return (f"line {line}: {header}: this is a systemd unit, not a {fmt} file: systemd "
                f"reads its Environment= lines by its own rules, so a line added here as "
                f"{fmt} takes no effect; manage {named} as --format dotenv")
    if bindings and all(n in bindings for n, _ in _content_lines(text)):
        return None
    docs = _yaml_docs(text)
    if docs is None:
        return None
    if isinstance(docs[0], _TooDeep):
        return (f"line {docs[0]}: YAML nested more than {MAX_NESTING} deep, deeper than the "
                f"ledger reads in any format; as a {fmt} file a knob added to it would take "
                "no effect")
    return (f"this is {_yaml_advice(docs)}; as a {fmt} file a knob added to it would "
            f"take no effect")


def refuse_foreign(text: str, fmt: str, bindings: tuple[int, ...] = ()) -> None:
    """Raise :class:`WrongFormat` when ``text`` is plainly not a ``fmt`` file."""
    why = foreign_content(text, fmt, bindings)
    if why is not None:
        raise WrongFormat(why)


__all__ = ["WrongFormat", "foreign_content", "might_be_foreign", "refuse_foreign"]
