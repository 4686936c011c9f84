"""How much of an engine release the bundled catalog knows, counted from the release's sources.

    python benchmarks/catalog_coverage.py WHEEL_OR_SRC_DIR [WHEEL_OR_SRC_DIR ...] [--missing N]
    python benchmarks/catalog_coverage.py --all /tmp/engine_src      # one line per release

Each argument is a wheel (``pip download --no-deps --only-binary :all: vllm==X``), an sdist or
a source tree (``benchmarks/fetch_releases.py`` writes one per release under
``/tmp/engine_src``); it is read as files, never imported.  The names are counted here by
a reader of its own (not ``envknobs.catalogs.generate``'s), so that a name the generator
misses shows up as missing:

* vLLM env vars: the string keys of ``environment_variables`` in ``vllm/envs.py``; the
  default is the literal second argument of the ``os.getenv("X", ...)`` in its lambda;
* vLLM flags: the first ``--x`` of every ``add_argument`` call in ``vllm/engine/arg_utils.py``,
  and in the module under ``vllm/entrypoints/`` whose ``make_arg_parser`` calls
  ``FrontendArgs.add_cli_args``: that function's ``add_argument`` calls and one ``--field-name``
  per annotated field of ``*FrontendArgs`` classes there;
* SGLang env vars: the ``NAME = EnvX(default)`` fields of ``sglang/srt/environ.py`` (before
  that file, 0.4 to 0.5.2: every ``SGLANG_*``/``SGL_*`` read outside ``sglang/test/``, a regex
  with the literal default the read gives); also
  (reported apart, as the wider figure) every ``SGLANG_*`` name the package reads through
  ``os.environ``/``getenv``/``get_*_env_var``/``envs.``;
* SGLang flags: the first ``--x`` of every ``add_argument`` call in ``sglang/srt/server_args.py``
  and each ``A[T, "doc" | Arg(...)]`` field of ``sglang/srt/arg_groups/fields/*.py`` and of
  ``server_args.py`` itself
  (``cli_name=`` when given, ``no_cli=True`` skipped), with its ``= literal`` default.

Printed per release and section: names in the source, how many the catalog has (%), with a
type (%), with a non-null default (%), and, where the source gives a literal default, how
many the catalog's default agrees with.  Goal (issue 26): >= 95% of each release's env vars
and server flags, with types and defaults.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from envknobs.catalog_release import load_release
from envknobs.catalogs._source import EngineSource

NO_LITERAL = object()
_SGLANG_READ = re.compile(
    r"""(?:environ\.get\(|getenv\(|environ\[|env_var\(|environ\.setdefault\()\s*["'](SGLANG_[A-Z0-9_]+)["']"""
    r"""|\benvs\.(SGLANG_[A-Z0-9_]+)\b""")
# a release before sglang/srt/environ.py: each read and its literal default, if it gives one
_SGLANG_OLD_READ = re.compile(
    r"""(?:environ\.get\(|getenv\(|environ\[|env_var\()\s*["']((?:SGLANG|SGL)_[A-Z0-9_]+)["']"""
    r"""(?:\s*,\s*(?:default\s*=\s*)?("[^"\n]*"|'[^'\n]*'|-?[0-9][0-9.]*)\s*\))?""")


def _literal(node: ast.AST | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else NO_LITERAL
    except (ValueError, TypeError, SyntaxError):
        return NO_LITERAL


def _first_long(call: ast.Call) -> str | None:
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
            return arg.value
    return None


def _add_argument_names(tree: ast.AST, fields: dict[str, object] | None = None,
                        spreads: dict[str, dict[str, object]] | None = None) -> dict[str, object]:
    """``--x`` -> the default argparse gives it: ``default=`` when literal, a
    ``default=Cls.field`` looked up in ``fields``, ``**var["f"]`` in ``spreads[var]``,
    ``None`` when not given (``False`` / ``True`` for store_true / store_false);
    NO_LITERAL when computed."""
    out: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            name = _first_long(node)
            if not name:
                continue
            kw = {k.arg: k.value for k in node.keywords}
            if "default" in kw:
                ref = kw["default"]
                value = fields.get(ref.attr, NO_LITERAL) if (
                    fields is not None and isinstance(ref, ast.Attribute)) else _literal(ref)
            elif None in kw:  # **x_kwargs["field"]: that config class field's default
                spread = kw[None]
                key = _literal(spread.slice) if isinstance(spread, ast.Subscript) else None
                var = getattr(getattr(spread, "value", None), "id", None)
                value = (spreads or {}).get(var, {}).get(key, NO_LITERAL) if isinstance(key, str) else NO_LITERAL
            elif kw.get("action") is not None and not isinstance(kw["action"], ast.Constant):
                value = NO_LITERAL  # a custom action class
            else:
                value = {"store_true": False, "store_false": True}.get(_literal(kw.get("action")), None)
            out.setdefault(name, value)
    return out


def _class_defaults(tree: ast.AST, name: str, others: dict | None = None) -> dict[str, object]:
    """``field = literal`` defaults of class ``name`` (``field(default=...)``,
    ``Field(default=...)`` too; ``= Other.attr`` looked up in ``others``' defaults)."""
    out: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    value = item.value
                    if isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("field", "Field"):
                        value = next((k.value for k in value.keywords if k.arg == "default"), None)
                    if (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
                            and value.value.id in (others or {})):  # = ModelConfig.max_model_len
                        out[item.target.id] = others[value.value.id].get(value.attr, NO_LITERAL)
                    else:
                        out[item.target.id] = _literal(value) if value is not None else NO_LITERAL
    return out


def _vllm_config_defaults(src: EngineSource) -> dict[str, dict[str, object]]:
    """Config class -> field -> literal default, of every ``vllm/config/*.py``."""
    out: dict[str, dict[str, object]] = {}
    for rel in [n for n in src.names() if (n.startswith("vllm/config/") and n.endswith(".py"))
                or n == "vllm/config.py"]:
        tree = ast.parse(src.read(rel) or "")
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, _class_defaults(node, node.name))
    return out


def _serve_parser_module(src: EngineSource) -> str | None:
    """The module ``vllm serve`` takes ``make_arg_parser`` from (``from M import make_arg_parser``
    in ``vllm/entrypoints/cli/serve.py``), as a path; None without that file."""
    for node in ast.walk(ast.parse(src.read("vllm/entrypoints/cli/serve.py") or "")):
        if isinstance(node, ast.ImportFrom) and node.module and any(
                a.name == "make_arg_parser" for a in node.names):
            return node.module.replace(".", "/") + ".py"
    # before `vllm serve` had its own module (0.6): the OpenAI server's parser
    old = "vllm/entrypoints/openai/cli_args.py"
    return old if "def make_arg_parser" in (src.read(old) or "") else None


def vllm_counts(src: EngineSource) -> tuple[dict, dict]:
    env: dict[str, object] = {}
    for node in ast.walk(ast.parse(src.read("vllm/envs.py"))):
        target = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
        if getattr(target, "id", None) == "environment_variables" and isinstance(node.value, ast.Dict):
            for key, value in zip(node.value.keys, node.value.values):
                if isinstance(key, ast.Constant):
                    env[key.value] = _env_default(key.value, value)
    arg_utils = ast.parse(src.read("vllm/engine/arg_utils.py"))
    configs = _vllm_config_defaults(src)
    spreads = {}  # model_kwargs = get_kwargs(ModelConfig): the spread's class
    for node in ast.walk(arg_utils):
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "get_kwargs"
                and node.value.args and isinstance(node.value.args[0], ast.Name)):
            spreads[node.targets[0].id] = configs.get(node.value.args[0].id, {})
    flags = _add_argument_names(arg_utils, None, spreads)
    serve = _serve_parser_module(src)
    for rel in [serve] if serve else []:
        tree = ast.parse(src.read(rel) or "")
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "make_arg_parser":
                flags.update({k: v for k, v in _add_argument_names(node).items() if k not in flags})
            if isinstance(node, ast.ClassDef) and node.name.endswith("FrontendArgs"):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        flags.setdefault("--" + item.target.id.replace("_", "-"), _literal(item.value))
    return env, flags


def _env_default(name: str, value: ast.AST) -> object:
    for node in ast.walk(value):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("getenv", "get")
                and len(node.args) >= 2 and _literal(node.args[0]) == name):
            return _literal(node.args[1])
    return NO_LITERAL


def _sglang_scattered(src: EngineSource) -> dict[str, object]:
    """Before ``environ.py``: every ``SGLANG_*``/``SGL_*`` read outside ``sglang/test/``,
    with the literal default of its first read that gives one."""
    env: dict[str, object] = {}
    for rel in src.names():
        if rel.startswith("sglang/") and rel.endswith(".py") and not rel.startswith("sglang/test/"):
            for name, default in _SGLANG_OLD_READ.findall(src.read(rel) or ""):
                if env.get(name, NO_LITERAL) is NO_LITERAL:
                    env[name] = _literal(ast.parse(default, mode="eval").body) if default else NO_LITERAL
    return env


def sglang_counts(src: EngineSource) -> tuple[dict, dict, set]:
    env: dict[str, object] = {}
    if src.read("sglang/srt/environ.py") is None:
        env = _sglang_scattered(src)
    for node in ast.walk(ast.parse(src.read("sglang/srt/environ.py") or "")):
        if isinstance(node, ast.ClassDef) and node.name == "Envs":
            for item in node.body:
                if (isinstance(item, ast.Assign) and isinstance(item.value, ast.Call)
                        and getattr(item.value.func, "id", "").startswith("Env")):
                    env[item.targets[0].id] = _literal(item.value.args[0]) if item.value.args else NO_LITERAL
    server_args = ast.parse(src.read("sglang/srt/server_args.py"))
    flags = _add_argument_names(server_args, _class_defaults(server_args, "ServerArgs"))
    for rel in sorted(n for n in src.names() if n.startswith("sglang/srt/arg_groups/fields/")
                      or n == "sglang/srt/server_args.py"):  # ServerArgs' own A[...] fields: 0.5.14-0.5.19
        for node in ast.walk(ast.parse(src.read(rel) or "")):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    name = _sglang_field_flag(item)
                    if name:
                        flags.setdefault(name, _literal(item.value))
    reads: set[str] = set()
    for rel in src.names():
        if rel.startswith("sglang/") and rel.endswith(".py"):
            reads.update(a or b for a, b in _SGLANG_READ.findall(src.read(rel) or ""))
    return env, flags, reads | set(env)


def _sglang_field_flag(item: ast.AST) -> str | None:
    if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            and isinstance(item.annotation, ast.Subscript)
            and getattr(item.annotation.value, "id", None) in ("A", "Annotated")):
        return None
    parts = getattr(item.annotation.slice, "elts", [])
    meta = parts[1] if len(parts) > 1 else None
    if isinstance(meta, ast.Call) and getattr(meta.func, "id", None) == "Arg":
        kw = {k.arg: _literal(k.value) for k in meta.keywords}
        if kw.get("no_cli") is True:
            return None
        if isinstance(kw.get("cli_name"), str):
            return kw["cli_name"]
    elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
        return None
    return "--" + item.target.id.replace("_", "-")


def _same(catalog: object, source: object) -> bool:
    """Whether the catalog's default is the source's literal one, read as the engine reads
    it: an env var's default is a string (``"10000"`` is the int 10000, ``"False"`` and
    ``""`` a false bool); a list default is its words."""
    if isinstance(catalog, bool):
        if isinstance(source, str):
            return (source.strip().lower() in ("1", "true", "yes", "y")) == catalog
        return source is catalog
    if isinstance(catalog, (int, float)) and not isinstance(source, bool):
        try:
            return float(source) == float(catalog)
        except (TypeError, ValueError):
            return False
    if isinstance(source, (list, tuple)):
        return isinstance(catalog, list) and [str(v) for v in catalog] == [str(v) for v in source]
    return catalog == source or (catalog is not None and str(catalog) == str(source))


def section(label: str, source: dict, registry, missing: int, quiet: bool = False) -> tuple[float, float]:
    """Print one section's figures; return the share known with a type and the default
    the source gives (a default the source computes cannot be shown and is not held
    against the catalog; one it gives literally, ``None`` included, must agree)."""
    known = [n for n in source if registry.get(n) is not None]
    typed = [n for n in known if registry.get(n).type]
    literal = [n for n in known if source[n] is not NO_LITERAL]
    agree = [n for n in literal if _same(registry.get(n).default, source[n])]
    shown = [n for n in known if registry.get(n).default is not None]
    good = [n for n in typed if n not in literal or n in agree]
    total = len(source) or 1
    if quiet:
        return len(good) / total, len(agree) / (len(literal) or 1)
    print(f"  {label:<9} {len(source):>4} in source, {len(known):>4} in catalog ({len(known) / total:.1%}), "
          f"with type {len(typed) / total:.1%}, a default shown {len(shown) / total:.1%}; "
          f"literal default (None too) agrees {len(agree)}/{len(literal)}, "
          f"computed in the source {len(known) - len(literal)}; "
          f"with type and the source's default {len(good) / total:.1%}")
    gone = sorted(set(source) - set(known))
    if gone:
        print(f"            missing: {', '.join(gone[:missing])}{' ...' if len(gone) > missing else ''}")
    wrong = sorted(set(literal) - set(agree))
    if wrong:
        shown = [f"{n} (source {source[n]!r}, catalog {registry.get(n).default!r})" for n in wrong[:missing]]
        print(f"            default differs: {', '.join(shown)}")
    return len(good) / total, len(agree) / (len(literal) or 1)


def report(path: str, missing: int, brief: bool = False) -> bool:
    src = EngineSource(path)
    names = src.names()
    engine = "vllm" if "vllm/envs.py" in names else "sglang"
    version = src.version(engine)
    knobs, flags, _ = load_release(engine, version)
    if not brief:
        print(f"{engine} {version} ({path})")
    if engine == "vllm":
        env, flag_src = vllm_counts(src)
        wider = None
    else:
        env, flag_src, wider = sglang_counts(src)
    env_cov, env_agree = section("env vars", env, knobs, missing, brief)
    flag_cov, flag_agree = section("flags", flag_src, flags, missing, brief)
    if brief:
        print(f"{engine:<6} {version:<12} env vars {len(env):>4} {env_cov:>6.1%} (defaults agree "
              f"{env_agree:>6.1%})  flags {len(flag_src):>4} {flag_cov:>6.1%} (defaults agree "
              f"{flag_agree:>6.1%})", flush=True)
        return env_cov >= 0.95 and flag_cov >= 0.95
    if wider is not None:
        known = sum(1 for n in wider if knobs.get(n) is not None)
        print(f"  SGLANG_* names read anywhere in the package: {len(wider)}, "
              f"{known} in catalog ({known / (len(wider) or 1):.1%})")
    return env_cov >= 0.95 and flag_cov >= 0.95


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", help="wheel, sdist or unpacked source tree")
    parser.add_argument("--all", metavar="DIR", type=Path,
                        help="every <engine>-<version> tree in DIR (benchmarks/fetch_releases.py's "
                             "/tmp/engine_src), one line each")
    parser.add_argument("--missing", type=int, default=12, help="names listed per gap (default 12)")
    args = parser.parse_args(argv)
    sources = list(args.sources)
    if args.all is not None:
        from envknobs.timeline import version_key

        found = [p for p in args.all.iterdir() if p.is_dir() and "-" in p.name and not p.name.startswith(".")]
        sources += [str(p) for p in sorted(found, key=lambda p: (p.name.split("-")[0],
                                                                  version_key(p.name.split("-", 1)[1])))]
    if not sources:
        parser.error("name a source or --all DIR")
    ok = [report(path, args.missing, args.all is not None) for path in sources]
    print(f"goal >= 95% env vars and flags per release: {sum(ok)}/{len(ok)} releases",
          "met" if all(ok) else "NOT met")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
