"""vLLM's knobs as its sources declare them (read with :mod:`ast`, never imported).

* env vars: the ``environment_variables`` dict of ``vllm/envs.py`` (each a lambda around
  ``os.getenv(NAME, default)``) and its ``removed_environment_variables`` table;
* server flags: the ``add_argument("--x", **kwargs["field"])`` calls of
  ``vllm/engine/arg_utils.py``, typed by the ``EngineArgs`` field and the config class
  field it defaults to (``ModelConfig.max_model_len``) with its ``Field(ge=..., le=...)``
  bounds and ``Literal`` choices.

vLLM's own grammar is kept: ``bool(int(os.getenv(...)))`` is an ``int`` knob (``1``/``0``;
``yes`` fails in vLLM, so it fails here); ``.lower() in ("1", "true")`` reads as a
``str`` with those choices would wrongly refuse ``0``, so it is a ``bool``.
"""

from __future__ import annotations

import ast

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
_GETENV = ("getenv", "get")


def _env_type(value: ast.AST) -> tuple[str, object, list[str] | None]:
    """(type, default, choices) of one ``environment_variables`` value expression."""
    if call_name(value) in ("env_with_choices", "env_list_with_choices", "env_set_with_choices"):
        choices = constant(value.args[2]) if len(value.args) > 2 else NOT_CONSTANT
        default = constant(value.args[1]) if len(value.args) > 1 else None
        choices = [str(c) for c in choices] if isinstance(choices, list) else None
        return "str", default, choices if call_name(value) == "env_with_choices" else None
    body = value.body if isinstance(value, ast.Lambda) else value
    getenv = next((n for n in ast.walk(body) if call_name(n) in _GETENV and n.args), None)
    default = constant(getenv.args[1]) if getenv is not None and len(getenv.args) > 1 else None
    dump = ast.dump(body)
    outer = call_name(body)
    if outer == "bool" and "func=Name(id='int'" in dump:
        return "int", default, None
    if outer in ("int", "float"):
        return outer, default, None
    if "'1'" in dump and "'true'" in dump and isinstance(body, ast.Compare | ast.BoolOp):
        return "bool", {"1": True, "true": True, "0": False, "": False}.get(str(default), None), None
    return "str", default, None


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
        kind, default, choices = _env_type(value)
        knobs.append({"name": env, "type": kind, "default": typed_default(default, kind),
                      "choices": choices, "doc": comment_above(lines, key.lineno)})
    return knobs, removed


def _config_fields(src: EngineSource) -> tuple[dict[str, dict[str, tuple[dict, object, dict]]], dict]:
    """Config class -> field -> (annotation info, default, Field bounds)."""
    trees = [t for t in (src.parse(n) for n in src.names()
                         if n.startswith(CONFIG_DIR) and n.endswith(".py")) if t is not None]
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
    for flag in flags:
        b = bounds.get(flag["name"][2:].replace("-", "_"), {})
        if flag["type"] in ("int", "float"):
            flag["min"] = b.get("ge", b.get("gt"))
            flag["max"] = b.get("le", b.get("lt"))
    return flags


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
