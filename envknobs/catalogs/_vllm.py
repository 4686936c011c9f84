"""vLLM's knobs as its sources declare them (read with :mod:`ast`, never imported).

* env vars: the ``environment_variables`` dict of ``vllm/envs.py`` (each a lambda around
  ``os.getenv(NAME, default)``) and its ``removed_environment_variables`` table;
* server flags: the ``add_argument("--x", **kwargs["field"])`` calls of
  ``vllm/engine/arg_utils.py``, typed by the ``EngineArgs`` field and the config class
  field it defaults to (``ModelConfig.max_model_len``) with its ``Field(ge=..., le=...)``
  bounds and ``Literal`` choices;
* frontend flags: the fields of the ``FrontendArgs`` dataclass (and its in-module bases) of
  ``vllm/entrypoints/common/cli_args.py`` (``launchers/cli_args.py`` in 0.30.0,
  ``openai/cli_args.py`` in older releases), each the flag ``--field-name`` that vLLM's
  ``get_kwargs`` makes of it (a ``bool`` field is a ``BooleanOptionalAction``: ``--no-x``
  too), with the overrides of its ``_customize_cli_kwargs`` (a ``json.loads`` type or a deleted ``nargs`` makes one value),
  and the literal ``add_argument("--x", ...)`` calls of ``make_arg_parser``.

vLLM's own grammar is kept: ``bool(int(os.getenv(...)))`` is an ``int`` knob (``1``/``0``;
``yes`` fails in vLLM, so it fails here); ``.lower() in ("1", "true")`` is a ``bool``
whose ``true_words`` are that tuple (vLLM reads any other word as false, so the checks
refuse ``yes`` rather than let it mean false).
"""

from __future__ import annotations

import ast
import re

from envknobs.catalogs._sglang import flag_entry
from envknobs.catalogs._sglang import add_argument_flags
from envknobs.catalogs._sglang import dataclass_fields
from envknobs.catalogs._sglang import replacement_in
from envknobs.catalogs._sglang import typed_default
from envknobs.catalogs._source import NOT_CONSTANT
from envknobs.catalogs._source import EngineSource
from envknobs.catalogs._source import annotation_info
from envknobs.catalogs._source import call_name
from envknobs.catalogs._source import constant
from envknobs.catalogs._source import first_doc_line
from envknobs.catalogs._source import comment_above
from envknobs.catalogs._source import keyword
from envknobs.catalogs._source import module_dicts
from envknobs.catalogs._source import read_module
from envknobs.catalogs._source import module_aliases

ENVS = "vllm/envs.py"
ARG_UTILS = "vllm/engine/arg_utils.py"
CONFIG_DIR = "vllm/config/"
CONFIG_FILE = "vllm/config.py"
CLI_ARGS = ("vllm/entrypoints/common/cli_args.py", "vllm/entrypoints/launchers/cli_args.py",
            "vllm/entrypoints/openai/cli_args.py")
_GETENV = ("getenv", "get")
_FLAG_RE = re.compile(r"--[a-z0-9][a-z0-9-]*")


def _env_type(value: ast.AST, name: str = "") -> tuple[str, object, list[str] | None]:
    """(type, default, choices) of one ``environment_variables`` value expression (the
    default is that of the ``os.getenv(name, ...)`` in it, else of its first getenv)."""
    if call_name(value) in ("env_with_choices", "env_list_with_choices", "env_set_with_choices"):
        choices = constant(value.args[2]) if len(value.args) > 2 else NOT_CONSTANT
        default = constant(value.args[1]) if len(value.args) > 1 else None
        choices = [str(c) for c in choices] if isinstance(choices, list) else None
        return "str", default, choices if call_name(value) == "env_with_choices" else None
    body = value.body if isinstance(value, ast.Lambda) else value
    getenvs = [n for n in ast.walk(body) if call_name(n) in _GETENV and n.args]
    getenv = next((n for n in getenvs if constant(n.args[0]) == name), getenvs[0] if getenvs else None)
    default = constant(getenv.args[1]) if getenv is not None and len(getenv.args) > 1 else None
    dump = ast.dump(body)
    outer = call_name(body)
    if outer == "bool" and "func=Name(id='int'" in dump:
        return "int", default, None
    if outer in ("int", "float"):
        return outer, default, None
    words = true_words(body)
    if words is not None:
        return "bool", str(default).lower() in words if isinstance(default, str) else None, words
    return "str", default, None


def true_words(body: ast.AST) -> list[str] | None:
    """The words of ``os.getenv(X, d).lower() in ("1", "true")``: vLLM reads those as true
    and any other value as false (so ``yes`` is false); also the first such test of an
    ``or``/``and`` (``... in ("1", "true") or bool(os.environ.get(OTHER))``); None else."""
    if isinstance(body, ast.BoolOp):
        return next((w for w in map(true_words, body.values) if w is not None), None)
    if not (isinstance(body, ast.Compare) and len(body.ops) == 1 and isinstance(body.ops[0], ast.In)):
        return None
    words = constant(body.comparators[0])
    if not (isinstance(words, (list, tuple)) and words and all(isinstance(w, str) for w in words)):
        return None
    return [str(w) for w in words] if {"1", "true"} & set(words) else None


def env_vars(src: EngineSource) -> tuple[list[dict], list[dict]]:
    tree, lines = read_module(src, ENVS)
    knobs: list[dict] = []
    removed: list[dict] = []
    tables = ("environment_variables", "removed_environment_variables")
    for table, key, value in module_dicts(tree, *tables):
        env = constant(key)
        if not isinstance(env, str):
            continue
        if table == "removed_environment_variables":
            note = constant(value)
            note = note if isinstance(note, str) else ""
            removed.append({"name": env, "status": "removed", "note": first_doc_line(note),
                            "replacement": replacement_in(note.replace("`", ""))})
            continue
        kind, default, choices = _env_type(value, env)
        words = choices if kind == "bool" else None  # a bool's "choices" are its true words
        knobs.append({"name": env, "type": kind, "default": typed_default(default, kind),
                      "choices": None if words else choices, "true_words": words,
                      "doc": comment_above(lines, key.lineno)})
    return knobs, removed


def _config_trees(src: EngineSource) -> list[ast.Module]:
    """The config modules: ``vllm/config/*.py``, or ``vllm/config.py`` before 0.10."""
    return [t for t in (src.parse(n) for n in src.names()
                        if (n.startswith(CONFIG_DIR) and n.endswith(".py")) or n == CONFIG_FILE)
            if t is not None]


def _config_fields(src: EngineSource) -> tuple[dict[str, dict[str, tuple[dict, object, dict]]], dict]:
    """Config class -> field -> (annotation info, default, Field bounds)."""
    trees = _config_trees(src)
    arg_tree = src.parse(ARG_UTILS)
    aliases = module_aliases(*trees, *([arg_tree] if arg_tree else []))
    classes: dict[str, dict[str, tuple[dict, object, dict]]] = {}
    for tree in trees:
        for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
            fields = classes.setdefault(cls.name, {})
            for node in cls.body:
                if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                    continue
                default, bounds = constant(node.value), {}
                if call_name(node.value) == "Field":
                    default = constant(keyword(node.value, "default"))
                    for k in ("ge", "gt", "le", "lt"):
                        v = constant(keyword(node.value, k))
                        if isinstance(v, (int, float)) and not isinstance(v, bool):
                            bounds[k] = v
                fields[node.target.id] = (annotation_info(node.annotation, aliases), default, bounds)
    return classes, aliases


def server_flags(src: EngineSource) -> list[dict]:
    tree = src.parse(ARG_UTILS)
    if tree is None:
        raise ValueError(f"{src.path}: no {ARG_UTILS}")
    classes, aliases = _config_fields(src)
    engine_fields = dataclass_fields(tree, aliases, "EngineArgs")
    bounds: dict[str, dict] = {}
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "EngineArgs"]:
        for node in cls.body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            ref = node.value
            if call_name(ref) == "get_field" and len(ref.args) == 2:
                owner, attr = getattr(ref.args[0], "id", ""), constant(ref.args[1])
            elif isinstance(ref, ast.Attribute) and isinstance(ref.value, ast.Name):
                owner, attr = ref.value.id, ref.attr
            else:
                continue
            found = classes.get(owner, {}).get(attr) if isinstance(attr, str) else None
            if found is None:
                continue
            info, default, field_bounds = found
            mine = engine_fields[node.target.id][0]
            engine_fields[node.target.id] = (info if info["type"] else mine, default)
            bounds[node.target.id] = field_bounds
    flags = add_argument_flags(tree, _by_subscript(tree, engine_fields), aliases)
    marked = deprecation_messages(tree)
    for flag in flags:
        if flag["name"] in marked:
            flag["deprecated"], flag["deprecated_note"] = marked[flag["name"]]
    spread = _spread_kwargs_flags(tree)
    for flag in flags:
        if flag["name"] in spread and flag["type"] == "bool" and flag["nargs"] is None:
            flag["negatable"] = True  # get_kwargs: a bool field is a BooleanOptionalAction
        b = bounds.get(flag["name"][2:].replace("-", "_"), {})
        if flag["type"] in ("int", "float"):
            flag["min"] = b.get("ge", b.get("gt"))
            flag["max"] = b.get("le", b.get("lt"))
    return flags + frontend_flags(src, aliases)


def config_fields(src: EngineSource) -> list[dict]:
    """The keys of the config-object flags (``--compilation-config '{"cudagraph_mode": ...}'``,
    also ``--compilation-config.cudagraph_mode``): for each ``EngineArgs`` field typed by a
    config class and passed on the command line, one item ``--flag.key`` per public field of
    that class, with its type, literal default, choices (a ``Literal``, or an ``Enum``
    class's members: ``CUDAGraphMode``) and the docstring under it."""
    tree = src.parse(ARG_UTILS)
    trees = _config_trees(src)
    if tree is None or not trees:
        return []
    aliases = module_aliases(*trees, tree)
    classes = {n.name: n for t in trees for n in t.body if isinstance(n, ast.ClassDef)}
    enums = {name: [m.targets[0].id for m in cls.body if isinstance(m, ast.Assign)
                    and isinstance(m.targets[0], ast.Name) and not m.targets[0].id.startswith("_")]
             for name, cls in classes.items() if any("Enum" in ast.dump(b) for b in cls.bases)}
    passed = {constant(a) for call in ast.walk(tree) if call_name(call) == "add_argument"
              for a in call.args[:1]}
    out: list[dict] = []
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "EngineArgs"]:
        for node in cls.body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            flag = "--" + node.target.id.replace("_", "-")
            owner = next((c for c in _annotation_names(node.annotation) if c in classes and c not in enums), None)
            if owner is None or flag not in passed:
                continue
            out += _class_keys(flag, classes[owner], aliases, enums)
    return out


def _annotation_names(node: ast.AST) -> list[str]:
    """The names an annotation mentions (a string annotation parsed first)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval")
        except SyntaxError:
            return []
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]


def _class_keys(flag: str, cls: ast.ClassDef, aliases: dict, enums: dict[str, list[str]]) -> list[dict]:
    out = []
    for i, node in enumerate(cls.body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)) \
                or node.target.id.startswith("_") or "ClassVar" in ast.dump(node.annotation):
            continue
        after = cls.body[i + 1] if i + 1 < len(cls.body) else None
        doc = constant(after.value) if isinstance(after, ast.Expr) else None
        info = annotation_info(node.annotation, aliases)
        default = _field_default(node.value)
        if call_name(node.value) == "Field":
            default = constant(keyword(node.value, "default"))
        enum = next((enums[n] for n in _annotation_names(node.annotation) if n in enums), None)
        if enum and info["type"] is None:
            info = {"type": "str", "choices": enum, "nargs": None}
            if isinstance(node.value, ast.Attribute) and node.value.attr in enum:
                default = node.value.attr  # CUDAGraphMode.PIECEWISE
        item = flag_entry(f"{flag}.{node.target.id}", info, default, doc if isinstance(doc, str) else "", [])
        item.pop("deprecated", None)
        out.append(item)
    return out


def deprecation_messages(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Flag -> (its replacement, "" when none is named; the message), from the module's
    ``_X_DEPRECATION_MESSAGE = "--x is deprecated ... Use --y instead."`` constants: the
    flag is the first ``--x`` before "deprecated" (``ir_op_priority (--ir-op-priority) is
    deprecated`` too)."""
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and "DEPRECATION" in node.targets[0].id):
            continue
        text = constant(node.value)
        if not isinstance(text, str) or "deprecated" not in text:
            continue
        head, _, rest = text.partition("deprecated")
        flag = next(iter(_FLAG_RE.findall(head)), None)
        if flag is not None:
            out[flag] = replacement_in(rest) or "", first_doc_line(text)
    return out


def frontend_flags(src: EngineSource, aliases: dict) -> list[dict]:
    """The ``vllm serve`` frontend's flags: ``make_arg_parser``'s own ``add_argument`` calls,
    then the fields of each frontend dataclass it registers with ``X.add_cli_args(parser)``.

    A release without the module has none (the engine flags still stand)."""
    rel = next((r for r in CLI_ARGS if src.read(r) is not None), None)
    if rel is None:
        return []
    tree, lines = read_module(src, rel)
    aliases = {**aliases, **module_aliases(tree)}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    make = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "make_arg_parser"), None)
    if make is None:
        return []
    flags = add_argument_flags(make, {}, aliases)
    for call in [n for n in ast.walk(make) if call_name(n) == "add_cli_args"]:
        owner = getattr(call.func, "value", None)
        if isinstance(owner, ast.Name) and owner.id in classes:
            flags += _dataclass_flags(classes, owner.id, aliases)
    return flags


def _lineage(classes: dict[str, ast.ClassDef], name: str) -> list[ast.ClassDef]:
    """``name`` and its bases defined in the same module, bases first."""
    cls = classes[name]
    out: list[ast.ClassDef] = []
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes and base.id != name:
            out += [c for c in _lineage(classes, base.id) if c not in out]
    return out + [cls]


def _dataclass_flags(classes: dict[str, ast.ClassDef], name: str, aliases: dict) -> list[dict]:
    """One flag per field, as ``get_kwargs`` + ``_customize_cli_kwargs`` make it."""
    lineage = _lineage(classes, name)
    overrides: dict[str, dict[str, object]] = {}
    for cls in lineage:
        for fn in [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_customize_cli_kwargs"]:
            _read_overrides(fn, overrides)
    fields: dict[str, dict] = {}
    for cls in lineage:
        for i, node in enumerate(cls.body):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            after = cls.body[i + 1] if i + 1 < len(cls.body) else None
            doc = constant(after.value) if isinstance(after, ast.Expr) else None
            info = annotation_info(node.annotation, aliases)
            over = overrides.get(node.target.id, {})
            info = {**info, "type": over.get("type", info["type"])}
            if info["type"] is None and isinstance(_field_default(node.value), str):
                info["type"] = "str"  # an imported Literal alias: its default still shows
            if over.get("one_value"):
                info["nargs"] = None
            default = over.get("default", _field_default(node.value))
            fields[node.target.id] = flag_entry("--" + node.target.id.replace("_", "-"), info, default,
                                           doc if isinstance(doc, str) else "", [],
                                           negatable=info["type"] == "bool" and info["nargs"] is None)
    return list(fields.values())


def _field_default(value: ast.AST | None) -> object:
    """A field's literal default: ``= 8000``, ``field(default=...)``, ``field(default_factory=list)``
    or ``field(default_factory=lambda: ["*"])``; ``NOT_CONSTANT`` when computed."""
    if call_name(value) != "field":
        return constant(value)
    if keyword(value, "default") is not None:
        return constant(keyword(value, "default"))
    factory = keyword(value, "default_factory")
    if isinstance(factory, ast.Name) and factory.id in ("list", "dict"):
        return [] if factory.id == "list" else {}
    return constant(factory.body) if isinstance(factory, ast.Lambda) else NOT_CONSTANT


def _read_overrides(fn: ast.FunctionDef, out: dict[str, dict[str, object]]) -> None:
    """``kwargs["field"]["key"] = v`` / ``del kwargs["field"]["nargs"]`` in ``fn``."""
    for node in ast.walk(fn):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else []
        for target in targets:
            if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript)):
                continue
            field, key = constant(target.value.slice), constant(target.slice)
            if not (isinstance(field, str) and isinstance(key, str)):
                continue
            over = out.setdefault(field, {})
            if isinstance(node, ast.Delete) and key == "nargs":
                over["one_value"] = True
            elif isinstance(node, ast.Assign) and key == "type":
                kind = getattr(node.value, "id", None)
                if kind in ("int", "float", "str"):
                    over["type"] = kind
                elif getattr(node.value, "attr", "") == "loads":  # one JSON value
                    over["type"], over["one_value"] = "str", True
            elif isinstance(node, ast.Assign) and key == "action" and constant(node.value) == "append":
                over["one_value"] = True
            elif isinstance(node, ast.Assign) and key == "default":
                over["default"] = constant(node.value)


def _spread_kwargs_flags(tree: ast.Module) -> set[str]:
    """The flags whose ``add_argument`` call spreads ``**kwargs["field"]`` (vLLM's ``get_kwargs``)."""
    out: set[str] = set()
    for call in [n for n in ast.walk(tree) if call_name(n) == "add_argument"]:
        longs = [c for c in map(constant, call.args) if isinstance(c, str) and c.startswith("--")]
        spreads = [kw.value for kw in call.keywords if kw.arg is None]  # also **{**kw["x"], ...}
        if longs and any(isinstance(n, ast.Subscript) for v in spreads for n in ast.walk(v)):
            out.add(longs[0])
    return out


def _by_subscript(tree: ast.Module, fields: dict) -> dict:
    """Also key each field by the flag that passes ``**kwargs["field"]`` for it."""
    out = dict(fields)
    for call in [n for n in ast.walk(tree) if call_name(n) == "add_argument"]:
        names = [constant(a) for a in call.args]
        longs = [n for n in names if isinstance(n, str) and n.startswith("--")]
        for kw in call.keywords:
            if kw.arg is None and isinstance(kw.value, ast.Subscript) and longs:
                key = constant(kw.value.slice)
                if isinstance(key, str) and key in fields:
                    out.setdefault(longs[0][2:].replace("-", "_"), fields[key])
    return out
