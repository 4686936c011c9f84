"""SGLang's knobs as its sources declare them (read with :mod:`ast`, never imported).

* env vars: the ``Envs`` class of ``sglang/srt/environ.py`` (``NAME = EnvInt(256)``); the
  ``*WithAlias(..., deprecated_name=OLD)`` fields and the ``_DEPRECATED_ENVS`` table give
  the renamed / deprecated names and their replacements;
* server flags: the ``A[T, Arg(...)]`` fields of ``sglang/srt/arg_groups/fields/*.py``
  (newer releases), the ``ServerArgs`` dataclass fields of ``sglang/srt/server_args.py``
  (older ones), and every literal ``parser.add_argument("--x", ...)`` call there.

SGLang's own grammar is kept: an ``EnvBool`` is a ``bool`` (``true/1/yes/y``...), an
``EnvTuple``/``EnvJSON`` a ``str``.
"""

from __future__ import annotations

import ast
import re

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

ENV_TYPES = {"EnvBool": "bool", "EnvInt": "int", "EnvFloat": "float", "EnvStr": "str",
             "EnvTuple": "str", "EnvJSON": "str"}
ENVIRON = "sglang/srt/environ.py"
SERVER_ARGS = "sglang/srt/server_args.py"
FIELDS_DIR = "sglang/srt/arg_groups/fields/"
_REPLACEMENT_RE = re.compile(
    r"(?:[Uu]se|instead:?|replaced by|Pass)\s+'?(--[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?|SGLANG_[A-Z0-9_]+)")


def typed_default(value: object, kind: str | None) -> object:
    """``value`` when it is a plain default of type ``kind``, else None (computed/unset)."""
    if value is NOT_CONSTANT or value is None or kind is None:
        return None
    if isinstance(value, str) and kind in ("int", "float"):  # os.getenv(X, "10000")
        try:
            value = int(value) if kind == "int" else float(value)
        except ValueError:
            return None
    if kind == "bool":
        return value if isinstance(value, bool) else None
    if kind == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if ok else None
    if isinstance(value, (list, tuple)):
        return None
    return value if isinstance(value, str) and "\n" not in value and "\x00" not in value else None


def replacement_in(text: str) -> str | None:
    m = _REPLACEMENT_RE.search(text or "")
    return m.group(1) if m else None


def env_vars(src: EngineSource) -> tuple[list[dict], list[dict]]:
    """(knobs, removed) of ``environ.py``; removed items name ``replacement``/``note``.
    A release before ``environ.py`` (0.4 to 0.5.2) reads its env vars where it uses
    them: :func:`scattered_env_vars`."""
    if src.read(ENVIRON) is None:
        return scattered_env_vars(src), []
    tree, lines = read_module(src, ENVIRON)
    knobs: list[dict] = []
    removed: list[dict] = []
    envs = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Envs")
    for node in envs.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        cls = call_name(node.value).replace("WithAlias", "")
        if cls not in ENV_TYPES:
            continue
        name, kind = node.targets[0].id, ENV_TYPES[cls]
        value = constant(node.value.args[0]) if node.value.args else constant(keyword(node.value, "default"))
        knobs.append({"name": name, "type": kind, "default": typed_default(value, kind),
                      "doc": comment_above(lines, node.lineno)})
        old = constant(keyword(node.value, "deprecated_name"))
        if isinstance(old, str):
            removed.append({"name": old, "status": "renamed", "replacement": name, "note": ""})
    removed.extend(_deprecated_table(tree))
    return knobs, removed


_PREFIX_RE = re.compile(r"[A-Z][A-Z0-9]*_")


def prefix_renames(src: EngineSource) -> dict[str, str] | None:
    """The env-var prefixes the release rewrites at startup: ``environ.py``'s
    ``key.replace("SGL_", "SGLANG_", 1)`` over ``os.environ`` (0.5.3 on) makes every
    ``SGL_X`` read as ``SGLANG_X``.  None when the release has no such rewrite."""
    tree = src.parse(ENVIRON) if src.read(ENVIRON) is not None else None
    out: dict[str, str] = {}
    for node in ast.walk(tree) if tree else ():
        if call_name(node) == "replace" and len(node.args) >= 2:
            old, new = constant(node.args[0]), constant(node.args[1])
            if isinstance(old, str) and isinstance(new, str) and _PREFIX_RE.fullmatch(old) \
                    and _PREFIX_RE.fullmatch(new):
                out[old] = new
    return out or None


_HELPERS = {"get_bool_env_var": "bool", "get_int_env_var": "int", "get_float_env_var": "float"}
_ENV_PREFIXES = ("SGLANG_", "SGL_")


def scattered_env_vars(src: EngineSource) -> list[dict]:
    """The ``SGLANG_*``/``SGL_*`` env vars an older release reads where it uses them:
    ``get_bool_env_var("X", default="false")`` (a bool; its true words those of the
    helper's own ``in ("true", "1")``), ``get_int_env_var`` / ``get_float_env_var``,
    ``int(os.getenv("X", "4096"))`` / ``float(...)``, and plain ``os.getenv`` /
    ``os.environ.get`` / ``os.environ["X"]`` reads (a str, or the type of a non-string
    literal default).  ``sglang/test/`` is left out (the test harness's own switches).
    A name read in several places keeps its most typed read (helper, then a converted
    read, then a plain one), the first of those in file order."""
    words = _helper_true_words(src)
    found: dict[str, tuple[int, dict]] = {}
    for rel in [n for n in src.names() if n.startswith("sglang/") and n.endswith(".py")
                and not n.startswith("sglang/test/")]:
        text = src.read(rel) or ""
        if "SGL" not in text:  # most modules read no env var: not worth parsing
            continue
        try:
            tree = ast.parse(text, filename=rel)
        except SyntaxError:
            continue
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            read = _env_read(node, parents)
            if read is None or not read[1]["name"].startswith(_ENV_PREFIXES):
                continue
            rank, knob = read
            if knob["type"] == "bool":
                knob["true_words"] = words
            if knob["name"] not in found or rank < found[knob["name"]][0]:
                found[knob["name"]] = (rank, knob)
    return [knob for _, knob in found.values()]


def _env_read(node: ast.AST, parents: dict) -> tuple[int, dict] | None:
    """(rank, knob) of one env read expression; None for anything else."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
            and getattr(node.value, "attr", "") == "environ":
        name = constant(node.slice)
        return (3, _scattered(name, "str", None)) if isinstance(name, str) else None
    helper = call_name(node)
    if helper not in (*_HELPERS, "getenv", "get") or not node.args:
        return None
    if helper == "get" and getattr(node.func.value, "attr", "") != "environ":
        return None
    name = constant(node.args[0])
    if not isinstance(name, str):
        return None
    given = node.args[1] if len(node.args) > 1 else keyword(node, "default")
    default = constant(given) if given is not None else None
    if helper in _HELPERS:
        kind = _HELPERS[helper]
        if kind == "bool":
            default = str(default if default is not None else "false").lower() in ("true", "1")
        return 0, _scattered(name, kind, default)
    outer = call_name(parents.get(node))
    if outer in ("int", "float"):
        return 1, _scattered(name, outer, default)
    kind = "str"
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        kind = "float" if isinstance(default, float) else "int"
    return 2, _scattered(name, kind, default)


def _scattered(name: str, kind: str, default: object) -> dict:
    return {"name": name, "type": kind, "default": typed_default(default, kind), "doc": ""}


def _helper_true_words(src: EngineSource) -> list[str] | None:
    """The true words of the release's ``get_bool_env_var`` (``("true", "1")``)."""
    for rel in ("sglang/srt/utils.py", "sglang/srt/utils/common.py"):
        tree = src.parse(rel) if src.read(rel) is not None else None
        fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                   and n.name == "get_bool_env_var"), None) if tree else None
        for node in ast.walk(fn) if fn else ():
            words = constant(node) if isinstance(node, (ast.Tuple, ast.List)) else None
            if isinstance(words, (tuple, list)) and "true" in words:
                return [str(w) for w in words]
    return None


def bool_words(src: EngineSource) -> dict[str, list[str]] | None:
    """The words ``EnvBool.parse`` takes, ``{"true": [...], "false": [...]}``: each
    ``if value in [...]: return True|False`` of it (SGLang lower-cases the value first and
    raises on any other word, so ``on`` is refused).  None when the release's ``EnvBool``
    has no such literal lists (the generic boolean words are then used)."""
    if src.read(ENVIRON) is None:
        return None
    tree, _ = read_module(src, ENVIRON)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EnvBool"), None)
    parse = next((n for n in (cls.body if cls else []) if isinstance(n, ast.FunctionDef)
                  and n.name == "parse"), None)
    out: dict[str, list[str]] = {}
    for node in ast.walk(parse) if parse else ():
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and isinstance(node.test.ops[0], ast.In) and node.body
                and isinstance(node.body[0], ast.Return)):
            continue
        words, result = constant(node.test.comparators[0]), constant(node.body[0].value)
        if isinstance(result, bool) and isinstance(words, (list, tuple)):
            out["true" if result else "false"] = [str(w) for w in words]
    return out if set(out) == {"true", "false"} else None


def _deprecated_table(tree: ast.Module) -> list[dict]:
    """The ``_DEPRECATED_ENVS`` table (``transform=_invert_bool``: the replacement means the
    opposite, so ``inverts``), else the ``_print_deprecated_env(...)`` calls of older
    releases."""
    out: list[dict] = []
    for _, key, value in module_dicts(tree, "_DEPRECATED_ENVS"):
        name = constant(key)
        if not isinstance(name, str) or not isinstance(value, ast.Call):
            continue
        repl = constant(keyword(value, "replacement"))
        note = constant(keyword(value, "note"))
        note = note if isinstance(note, str) else ""
        repl = repl if isinstance(repl, str) else replacement_in(note)
        out.append({"name": name, "status": "deprecated", "replacement": repl,
                    "note": first_doc_line(note),
                    "inverts": "invert" in getattr(keyword(value, "transform"), "id", "")})
    return out or _deprecation_calls(tree)


def _deprecation_calls(tree: ast.Module) -> list[dict]:
    """``_print_deprecated_env(...)`` calls (0.5.4 to 0.5.17): the old name and its
    replacement, in the order the function's own parameters say (``(new_name,
    old_name)`` in some releases, ``(old_name, new_name=None)`` in others)."""
    defs = {n.name: [a.arg for a in n.args.args] for n in tree.body
            if isinstance(n, ast.FunctionDef) and "deprecated_env" in n.name}
    out: dict[str, dict] = {}
    for call in [n for n in ast.walk(tree) if call_name(n) in defs]:
        params = defs[call_name(call)]
        given = dict(zip(params, map(constant, call.args)))
        old = next((v for k, v in given.items() if "old" in k), None)
        new = next((v for k, v in given.items() if "new" in k), None)
        if "old" not in "".join(params) and call.args:  # (env_name, suggestion)
            old = constant(call.args[0])
            hint = constant(call.args[1]) if len(call.args) > 1 else None
            new = replacement_in(hint) if isinstance(hint, str) else None
        if isinstance(old, str) and old.isupper():
            out.setdefault(old, {"name": old, "status": "deprecated",
                                 "replacement": new if isinstance(new, str) else None,
                                 "note": ""})
    return list(out.values())


def flag_entry(name: str, info: dict, default: object, doc: str, aliases: list[str],
          negatable: bool = False) -> dict:
    nargs = info["nargs"]
    # an annotation of imported aliases (``RunnerOption``) says no type: a str default still shows
    kind = info["type"] or ("str" if isinstance(default, str) and not nargs else None)
    value = default
    if nargs and isinstance(default, (list, tuple)):
        ok = all(typed_default(v, kind) is not None for v in default) and default
        value = [typed_default(v, kind) for v in default] if ok else None
    else:
        value = typed_default(default, kind)
    flag = {"name": name, "type": kind, "default": value, "doc": first_doc_line(doc),
            "aliases": aliases, "negatable": negatable, "nargs": nargs,
            "choices": info["choices"]}
    if "deprecated" in (doc or "").lower()[:40]:
        flag["deprecated"] = replacement_in(doc) or ""
    return flag


def _arg_meta(meta: ast.AST) -> dict:
    if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
        return {"help": meta.value}
    if not (isinstance(meta, ast.Call) and call_name(meta) == "Arg"):
        return {}
    out = {k.arg: k.value for k in meta.keywords if k.arg}
    help_ = constant(out.get("help"))
    return {**out, "help": help_ if isinstance(help_, str) else ""}


def _choices(node: ast.AST | None, aliases: dict) -> list[str] | None:
    if isinstance(node, ast.Name) and node.id in aliases:
        node = aliases[node.id]
    value = constant(node)
    if isinstance(value, (list, tuple)) and value:
        return [str(v) for v in value]
    return None


def annotated_fields(src: EngineSource, aliases: dict) -> list[dict]:
    """Flags of the ``A[T, Arg(...)] = default`` fields: of ``arg_groups/fields/*.py``
    (0.5.20 on), else of ``server_args.py``'s own classes (0.5.14 to 0.5.19)."""
    flags: list[dict] = []
    files = [n for n in src.names() if n.startswith(FIELDS_DIR) and n.endswith(".py")]
    for rel in files or [SERVER_ARGS]:  # 0.5.14 to 0.5.19: the fields are ServerArgs' own
        tree = src.parse(rel)
        if tree is None:
            continue
        for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
            for node in cls.body:
                ann = getattr(node, "annotation", None)
                if not (isinstance(node, ast.AnnAssign) and isinstance(ann, ast.Subscript)
                        and getattr(ann.value, "id", "") in ("A", "Annotated")
                        and isinstance(ann.slice, ast.Tuple)):
                    continue
                meta = _arg_meta(ann.slice.elts[1])
                if not meta or constant(meta.get("no_cli")) is True:
                    continue
                info = annotation_info(ann.slice.elts[0], aliases)
                info["choices"] = _choices(meta.get("choices"), aliases) or info["choices"]
                if meta.get("nargs") is not None:
                    info["nargs"] = constant(meta["nargs"]) if constant(meta["nargs"]) in ("+", "*") else None
                if meta.get("type_parser") is not None and info["nargs"] is None:
                    info["type"] = info["type"] if info["type"] != "bool" else None
                cli = constant(meta.get("cli_name"))
                name = cli if isinstance(cli, str) else "--" + node.target.id.replace("_", "-")
                given = constant(meta.get("aliases"))
                alias_list = [a for a in given if isinstance(a, str)] if isinstance(given, list) else []
                negatable = "BooleanOptional" in ast.dump(meta.get("action") or ast.Pass())
                flags.append(flag_entry(name, info, constant(node.value), meta["help"],
                                   alias_list, negatable))
    return flags


def add_argument_flags(tree: ast.Module, fields: dict[str, tuple[dict, object]], aliases: dict) -> list[dict]:
    """Flags of the literal ``add_argument("--x", ...)`` calls; types/defaults from ``fields``."""
    flags: list[dict] = []
    for call in [n for n in ast.walk(tree) if call_name(n) == "add_argument"]:
        names = [constant(a) for a in call.args]
        names = [n for n in names if isinstance(n, str) and n.startswith("-")]
        longs = [n for n in names if n.startswith("--")]
        if not longs:
            continue
        dest = constant(keyword(call, "dest"))
        dest = dest if isinstance(dest, str) else longs[0][2:].replace("-", "_")
        info, default = fields.get(dest, ({"type": None, "choices": None, "nargs": None}, NOT_CONSTANT))
        info = dict(info)
        action = constant(keyword(call, "action"))
        action_dump = ast.dump(keyword(call, "action") or ast.Pass())
        if action in ("store_true", "store_false") or any(
                a in action_dump for a in ("BooleanOptional", "StoreTrue", "StoreFalse")):
            info["type"] = "bool"  # also SGLang's DeprecatedStoreTrueAction: still a switch
        kind = getattr(keyword(call, "type"), "id", None)
        if kind in ("int", "float", "str"):
            info["type"] = kind
        info["choices"] = _choices(keyword(call, "choices"), aliases) or info["choices"]
        nargs = constant(keyword(call, "nargs"))
        info["nargs"] = nargs if nargs in ("+", "*") else info["nargs"]
        node = keyword(call, "default")
        given = constant(node)
        if given is NOT_CONSTANT and isinstance(node, ast.Attribute) and node.attr in fields:
            given = fields[node.attr][1]  # default=EngineArgs.max_model_len: the field's own
        default = given if node is not None else default
        if action == "store_true" and (default is NOT_CONSTANT or (node is None and default is None)):
            default = False  # argparse's own: a switch not given is False (a field's None never shows)
        help_ = constant(keyword(call, "help"))
        flags.append(flag_entry(longs[0], info, default, help_ if isinstance(help_, str) else "",
                           [n for n in names if n != longs[0]], "BooleanOptional" in action_dump))
        new_flag = constant(keyword(call, "new_flag"))  # SGLang's Deprecated*Action names it
        if isinstance(new_flag, str):
            flags[-1]["deprecated"] = new_flag
    return flags


def dataclass_fields(tree: ast.Module, aliases: dict, cls_name: str) -> dict[str, tuple[dict, object]]:
    out: dict[str, tuple[dict, object]] = {}
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls_name]:
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out[node.target.id] = (annotation_info(node.annotation, aliases), constant(node.value))
    return out


def server_flags(src: EngineSource) -> list[dict]:
    """Every server flag of this SGLang release (a flag named twice keeps its first place)."""
    trees = [src.parse(n) for n in src.names()
             if (n.startswith(FIELDS_DIR) or n == SERVER_ARGS or n.endswith("arg_groups/choices.py"))]
    trees = [t for t in trees if t is not None]
    aliases = module_aliases(*trees)
    flags = annotated_fields(src, aliases)
    tree = src.parse(SERVER_ARGS)
    if tree is not None:
        flags += add_argument_flags(tree, dataclass_fields(tree, aliases, "ServerArgs"), aliases)
    return flags
