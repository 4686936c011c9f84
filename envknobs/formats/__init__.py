"""Target formats: read, set and unset env knobs in config files, byte-preservingly.

A *target format* knows one kind of config file a serving stack reads its environment
from, and edits it the way a careful operator would by hand:

* ``bash``   -- serve scripts (``export K=V``, ``K=V``, ``K=V exec python ...``),
  see :mod:`envknobs.formats.bash` (a package: lexer, tree, flow,
  launch, analysis, summary, select, edit, write);
* ``dotenv`` -- python-dotenv / systemd ``EnvironmentFile`` files,
  see :mod:`envknobs.formats.dotenv`;
* ``k8s``    -- the ``env:`` list of one container in Kubernetes manifests, and the
  launch flags of its ``command:``/``args:`` (:mod:`envknobs.formats.yaml.argv`),
  see :mod:`envknobs.formats.yaml.k8s`;
* ``systemd`` -- a service unit: its ``Environment=`` lines and the flags of its
  ``ExecStart=`` command, read by systemd's rules, see :mod:`envknobs.formats.systemd`;
* ``yaml-map`` -- a YAML mapping of knobs: an engine's ``--config`` file, or an env map
  at a key path of a bigger file (a compose ``- K=V`` list too,
  :mod:`envknobs.formats.yaml.envlist`), or a Helm values list of server arguments,
  see :mod:`envknobs.formats.yaml.map`.

``bash`` and ``dotenv`` refuse a file that is plainly another format (a systemd unit, a
YAML document), naming the format to use (:mod:`envknobs.formats.common.sniff`): there a
new ``K=V`` line would take no effect.

Every format works on the whole file as one ``str`` (decoded as UTF-8 with
``errors="surrogateescape"`` by the caller, who encodes it back the same way) and returns
the whole new text.  Bytes outside the change come back identical: comments, order,
quoting, blank lines, CRLF line endings, a missing final newline, indentation.  Setting a
knob to the value it already has returns the text unchanged, so a no-op save is
byte-identical.

Errors are :class:`FormatError` (a ``ValueError``); invalid knob names or values raise
:class:`~envknobs.registry.KnobError` (also a ``ValueError``) from
:func:`~envknobs.registry.check_knob_name` / :func:`~envknobs.registry.check_knob_value`.
A ``FormatError`` message says what and where (``line N``), never the file path: the
caller knows the path and prefixes it.

Places (:mod:`envknobs.formats.common.places`).  The ``bash`` format also reports where each
knob is set — ``summary(text)``, ``knob(text, K)``, ``select_places(text, K, at)`` — and
takes a selection: ``set(text, K, V, at=LINE|ALL)``, ``unset(text, K, at=...)`` and
``edit_places(text, K, [PlaceEdit(key, value, raw, anchor)])``.  Without a selection an
edit of a knob with several places raises :class:`~envknobs.formats.common.places.AmbiguousKnob`
(a ``FormatError``) naming them all; ``AmbiguousKnob.describe(path)`` gives the message
with ``path:line``.  Launch flags are knobs named ``--flag`` there (see
:mod:`envknobs.flags`).
"""

from __future__ import annotations

from typing import Callable

from envknobs.formats.common import FormatError
from envknobs.formats.common import TargetFormat
from envknobs.formats.common.places import ALL
from envknobs.formats.common.places import AmbiguousKnob
from envknobs.formats.common.places import PlaceEdit


FORMAT_NAMES = ("bash", "dotenv", "k8s", "yaml-map", "systemd")


def get_format(
    name: str,
    *,
    container: str | None = None,
    key_path: str | None = None,
    check_key: Callable[[str], None] | None = None,
    strings: bool = False,
    engine: str | None = None,
) -> TargetFormat:
    """The format called ``name``.

    ``container`` selects the container for ``k8s``: its name, or a longer address
    (``NAME/CONTAINER``, ``KIND/NAME/ROLE/CONTAINER``, ``DOC:PATH``) where the name is
    not unique; see :mod:`envknobs.formats.yaml.containers`.  ``key_path`` is where the map of
    a ``yaml-map`` target is (None: the whole file), or the ``|`` block holding a ``bash``
    target's script in a YAML file (SkyPilot's ``run``), and ``OUTER|INNER`` the map at INNER
    of YAML embedded in the block at OUTER (:mod:`envknobs.formats.yaml.block`), ``check_key`` validates its keys
    (a flag catalog lookup raising KnobError), ``strings`` says its values are env
    strings (new values are always written as strings), ``engine`` (``sglang``/``vllm``)
    whose flag catalog spells and types its flags.  Raises :class:`FormatError` for an
    unknown format, a ``k8s`` format without a container, or an option given to a
    format that does not take it.
    """
    # Imported here so that loading one format does not pay for the others
    # (the YAML formats import ruamel.yaml).
    if name == "k8s":
        return _k8s_format(container, key_path is not None or check_key is not None)
    if container is not None:
        raise FormatError(f"a container is only meaningful for k8s targets, not {name}")
    if name == "yaml-map":
        return _yaml_map_format(key_path, check_key, strings, engine)
    if name == "bash" and key_path is not None and check_key is None:
        # a script held in a YAML file (SkyPilot `run: |`): envknobs.formats.yaml.block
        from envknobs.formats.yaml.block import script_at

        return script_at(key_path)
    if key_path is not None or check_key is not None:
        raise FormatError(f"a key path is only meaningful for yaml-map and bash targets, "
                          f"not {name}")
    if name == "bash":  # with the flags of a `bash -lc "..."` string (bash.inner)
        from envknobs.formats.bash.inner import WithInnerScript

        return WithInnerScript()
    if name == "dotenv":
        from envknobs.formats.dotenv import DotenvFormat

        return DotenvFormat()
    if name == "systemd":
        from envknobs.formats.dotenv import binding_lines
        from envknobs.formats.systemd import SystemdFormat
        from envknobs.formats.systemd.envfiles import file_reader

        return SystemdFormat(file_reader(binding_lines))
    raise FormatError(f"unknown target format {name!r} (use {', '.join(FORMAT_NAMES)})")


def _k8s_format(container: str | None, keyed: bool) -> TargetFormat:
    """``get_format("k8s", ...)``: ``keyed`` when a key path or key check was given."""
    if not container:
        raise FormatError("the k8s format needs a container address (--container)")
    if keyed:
        raise FormatError("a key path is only meaningful for yaml-map targets, not k8s")
    from envknobs.formats.yaml.k8s import K8sFormat

    return K8sFormat(container)


def _yaml_map_format(key_path: str | None, check_key: Callable[[str], None] | None,
                     strings: bool, engine: str | None) -> TargetFormat:
    """``get_format("yaml-map", ...)``: the map at ``key_path``, in a ``|`` block's YAML
    (``OUTER|INNER``) or an env map whose values may be strings of flags."""
    from envknobs.formats.yaml.map import YamlMapFormat

    if key_path is not None and "|" in key_path:  # OUTER|INNER: YAML in a `|` block
        from envknobs.formats.yaml.block import InBlock

        outer, _, inner = key_path.partition("|")
        return InBlock(outer, YamlMapFormat(inner or None, check_key, strings, engine))
    if strings:  # an env map: its values may be strings of flags (yaml.mapstrings)
        from envknobs.formats.yaml.mapstrings import EnvMapStrings

        return EnvMapStrings(YamlMapFormat(key_path, check_key, strings, engine))
    return YamlMapFormat(key_path, check_key, strings, engine)


__all__ = ["ALL", "FORMAT_NAMES", "AmbiguousKnob", "FormatError", "PlaceEdit", "TargetFormat", "get_format"]
