"""Run a bench command for two sides, in interleaved pairs A B B A A B …, and collect the rows.

The bench command is a template (user data, e.g. from ``ledger.yaml``)::

    {python} -m engine bench --mode offline --preset tiny --concurrency {concurrency}
        --num-prompts 32 --input-len 32 --output-len 32 --json {out}

It is split with :func:`shlex.split` *first*; then the placeholders ``{out}``,
``{concurrency}``, ``{rate}``, ``{engine_dir}``, ``{env_file}`` and ``{python}`` are substituted
inside each token, so a value can never add, remove or re-quote an argument.  ``{flags}``,
a token of its own, becomes the side's launch flags, one argument per word
(``--cuda-graph-max-bs 256``, a switch alone, ``--no-x`` for a false negatable one): how
the A/B of a flag entry reaches the server the bench starts.  It runs
without a shell, in the side's ``engine_dir``, with ``os.environ`` plus the side's env.
``{env_file}`` is a file with the side's env as ``K='V'`` lines that bash ``source``
and python-dotenv read alike.

Load points: a list of concurrencies, or a list of request rates (``rates``: an open-loop
sweep such as ``--request-rate {rate}``; ``inf`` is written ``inf``); a rate sweep needs a
template that uses ``{rate}``, or every run would be the same.

Order: one warm-up run per side first (at the first load point; not stored), then for
each load point and each repeat a pair of runs back to back, A then B in even repeats and
B then A in odd ones (A B B A A B …), so a machine drifting (thermal, noisy neighbours)
shifts both runs of a pair alike and the analysis judges the pairs
(:mod:`ledger.evidence.verdict`).  Why the order turns: whatever favours the second run
of a pair (a page cache the first one filled, a neighbour's periodic job) would otherwise
land on B every time and read as the knob's effect -- an A/A would show a "gain"; turned,
it lands on each side in half the pairs and only widens the interval.  A sequential A/B
(``until``) runs the pairs in rounds over the load points instead, so that it can stop
after any round.  Each run writes its result to ``{out}``: the
bundled engine's bench JSON, sglang ``bench_serving --output-file`` JSONL or vLLM
``--save-result`` JSON.

Ctrl-C (KeyboardInterrupt) kills the running bench and its whole process group (the
engine starts worker processes), removes the temp files and re-raises: nothing is
returned, so nothing is stored.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Callable
from typing import Mapping
from typing import Sequence

from envknobs.flags import check_flag_name
from envknobs.registry import KnobError
from envknobs.registry import check_knob_name
from envknobs.registry import check_knob_value
from ledger.errors import EvidenceError
from ledger.evidence.load import CONCURRENCY
from ledger.evidence.load import RATE
from ledger.evidence.load import LoadPoint
from ledger.evidence.load import format_rate
from ledger.evidence.load import parse_rate
from ledger.evidence.run_result import read_result
from ledger.evidence.run_result import same_workload
from ledger.evidence.store import host_info
from ledger.evidence.store import now_iso

DEFAULT_BENCH_COMMAND = (
    "{python} -m engine bench --mode offline --preset tiny --concurrency {concurrency} "
    "--num-prompts 32 --input-len 32 --output-len 32 --json {out}"
)
PLACEHOLDERS = ("out", "concurrency", "rate", "engine_dir", "env_file", "python", "flags")
_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
STDERR_TAIL = 2000

Progress = Callable[[int, int, float, str], None]
Until = Callable[[list[dict[str, Any]], int], bool]  # (rows so far, pairs) -> stop?


@dataclass(frozen=True)
class Side:
    """One side of an A/B: its name (``A``/``B``), env overrides and engine checkout.

    An env value of None means *unset*: the knob is removed from the bench's environment
    (even if the calling shell exports it) and left out of ``{env_file}``.
    """

    name: str
    env: Mapping[str, str | None] = field(default_factory=dict)
    engine_dir: Path = Path(".")
    flags: Mapping[str, str | None] = field(default_factory=dict)  # --flag -> value

    def __post_init__(self) -> None:
        if self.name not in ("A", "B"):
            raise EvidenceError(f"side name must be A or B, got {self.name!r}")
        try:
            for k, v in [*self.env.items(), *self.flags.items()]:
                (check_flag_name if k.startswith("-") else check_knob_name)(k)
                if v is not None:
                    check_knob_value(v)
        except KnobError as e:
            raise EvidenceError(f"side {self.name}: {e}") from None

    def flag_words(self) -> list[str]:
        """The side's flags as arguments, in name order (unset ones left out)."""
        from envknobs.catalog import lookup_flag

        words: list[str] = []
        for name, value in sorted(self.flags.items()):
            declared = lookup_flag(name)
            if value is None:
                continue
            if declared is not None and declared.type == "bool" or value in ("true", "false") and declared is None:
                if value.lower() in ("true", "1", "yes", "y", "on"):
                    words.append(name)
                elif declared is not None and declared.negatable:
                    words.append("--no-" + name.lstrip("-"))
                continue
            if declared is not None and declared.nargs:
                words += [name, *value.split()]
            else:
                words += [name, value]
        return words


@dataclass
class AbResult:
    """What :func:`run_alternating` measured: run rows (``side, concurrency|rate, repeat,
    metrics…``) and meta."""

    rows: list[dict[str, Any]]
    meta: dict[str, Any]
    started: str
    finished: str


def resolve_bench(command: str) -> str:
    """The template a ``--bench`` value stands for: ``aiperf:MODEL_DIR`` is AIPerf driving
    the bundled engine serving MODEL_DIR (see :mod:`ledger.evidence.aiperf_bench`; the
    directory is made absolute here, since the bench runs in the side's engine dir, and
    must hold the ``tokenizer.json`` AIPerf counts tokens with); anything else is itself."""
    from ledger.evidence import aiperf_bench

    if not command.startswith(aiperf_bench.PREFIX):
        return command
    model = Path(command[len(aiperf_bench.PREFIX):]).expanduser()
    if not (model / "tokenizer.json").is_file():
        raise EvidenceError(f"--bench {command}: {model} is not a checkpoint directory with a "
                            "tokenizer.json (aiperf:MODEL_DIR names the model the engine serves)")
    return aiperf_bench.bench_template(str(model.resolve()))


def check_template(template: str) -> list[str]:
    """Split a bench template and check its placeholders; returns the tokens."""
    try:
        tokens = shlex.split(template)
    except ValueError as e:
        raise EvidenceError(f"bench command {template!r} cannot be split: {e}") from e
    if not tokens:
        raise EvidenceError("the bench command is empty")
    used = {m.group(1) for t in tokens for m in _PLACEHOLDER_RE.finditer(t)}
    unknown = sorted(used - set(PLACEHOLDERS))
    if unknown:
        raise EvidenceError(
            "bench command has unknown placeholder(s) "
            + ", ".join("{" + u + "}" for u in unknown)
            + "; known: "
            + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        )
    if "out" not in used:
        raise EvidenceError("the bench command must write its JSON to {out}")
    if any("{flags}" in t and t != "{flags}" for t in tokens):
        raise EvidenceError("{flags} must be an argument of its own in the bench command")
    return tokens


def render_command(
    tokens: Sequence[str], values: Mapping[str, str], flags: Sequence[str] = ()
) -> list[str]:
    """Substitute placeholders inside each already-split token (never re-split); a
    ``{flags}`` token becomes the words of ``flags``."""

    def sub(m: re.Match[str]) -> str:
        return values[m.group(1)] if m.group(1) in values else m.group(0)

    out: list[str] = []
    for t in tokens:
        if t == "{flags}":
            out.extend(flags)
        else:
            out.append(_PLACEHOLDER_RE.sub(sub, t))
    return out


def env_file_text(env: Mapping[str, str | None]) -> str:
    """``K='V'`` lines that bash ``source`` and python-dotenv both read back as V.

    Single quotes are literal in bash; python-dotenv also unescapes ``\\\\`` and ``\\'``
    inside them, so values with a backslash or a quote use double quotes instead, where
    both unescape ``\\\\`` and ``\\"`` alike, and ``$`` or a backtick would expand in bash
    but not in dotenv.  So a value with a quote or backslash *and* a ``$`` or backtick has
    no spelling the two agree on, and is refused.
    """
    lines = []
    for k, v in sorted(env.items()):
        if v is None:
            continue  # unset: a K=V file cannot say "unset", and absent is what the bench sees
        check_knob_name(k)
        check_knob_value(v)
        if "'" not in v and "\\" not in v:
            lines.append(f"{k}='{v}'")
        elif "$" in v or "`" in v:
            raise EvidenceError(
                f"{k}={v!r}: a value with a quote or backslash and a '$' or '`' cannot be "
                "written to an env file that bash and dotenv read alike"
            )
        else:
            lines.append(f'{k}="' + v.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "".join(line + "\n" for line in lines)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _run_once(
    argv: list[str], cwd: Path, env: dict[str, str], err_path: Path, timeout_s: float | None
) -> None:
    """Run one bench; raise EvidenceError with the stderr tail on failure."""
    with open(err_path, "wb") as err:
        try:
            # Own session: Ctrl-C reaches us, not the bench, and we can kill its whole group.
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                start_new_session=True,
            )
        except OSError as e:
            raise EvidenceError(f"cannot start bench {shlex.join(argv)}: {e.strerror or e}") from e
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise EvidenceError(
                f"bench timed out after {timeout_s:g}s: {shlex.join(argv)}"
            ) from None
        except BaseException:
            _kill_group(proc)
            raise
    if rc != 0:
        tail = err_path.read_bytes()[-STDERR_TAIL:].decode("utf-8", "replace").strip()
        raise EvidenceError(
            f"bench failed (exit {rc}) in {cwd}: {shlex.join(argv)}" + (f"\n{tail}" if tail else "")
        )


def _load_points(concurrencies: Sequence[int], rates: Sequence[float] | None) -> list[LoadPoint]:
    if rates is not None:
        if list(concurrencies):
            raise EvidenceError("sweep concurrencies or request rates, not both")
        parsed = [parse_rate(r) for r in rates]
        if not parsed or any(p is None for p in parsed):
            raise EvidenceError(f"request rates must be > 0 (or inf), got {list(rates)!r}")
        return [LoadPoint(RATE, p) for p in parsed if p is not None]
    concs = list(concurrencies)
    if not concs or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in concs):
        raise EvidenceError(f"concurrencies must be positive integers, got {concs!r}")
    return [LoadPoint(CONCURRENCY, float(c)) for c in concs]


def run_alternating(
    command: str,
    side_a: Side,
    side_b: Side,
    concurrencies: Sequence[int],
    runs: int,
    *,
    progress: Progress | None = None,
    python: str = sys.executable,
    timeout_s: float | None = None,
    warmup: bool = True,
    rates: Sequence[float] | None = None,
    until: Until | None = None,
) -> AbResult:
    """Run the bench in interleaved pairs (A B, B A, A B, …) and return the measured rows
    (in the order they ran) and meta.

    ``rates`` (instead of ``concurrencies``, which must then be empty) sweeps request
    rates.  ``progress(done, total, eta_s, label)`` is called after every run (warm-ups
    count); ``eta_s`` extrapolates the mean run time so far.  ``until(rows, pairs)``: a
    sequential A/B (``ledger ab --until-decided``, :mod:`ledger.evidence.sequential`):
    the pairs run in rounds, one more pair at every load point a round, and ``until`` is
    asked after each; True stops there.  ``runs`` is then the most pairs a load point
    gets, and ``meta["runs"]`` the pairs each got.  Raises EvidenceError when the
    template is invalid, a run fails or its result is of no known shape.
    """
    tokens, points = _checked_inputs(command, side_a, side_b, concurrencies, rates, runs)
    plan = _alternating_plan(side_a, side_b, points, runs, warmup, by_round=until is not None)
    started, t0 = now_iso(), time.monotonic()
    got = _Measured()
    with tempfile.TemporaryDirectory(prefix="ledger-ab-") as tmpdir:
        tmp = Path(tmpdir)
        env_files = {side.name: _env_file(tmp, side) for side in (side_a, side_b)}
        for done, (side, point, repeat, ends_round) in enumerate(plan, 1):
            what = "warm-up" if repeat is None else f"run {repeat + 1}/{runs}"
            label = f"{what} {side.name} @{point.label}"
            out = tmp / f"out-{done}.json"
            argv = _side_argv(tokens, side, point, out, env_files[side.name], python)
            _run_once(argv, Path(side.engine_dir), _side_environ(side), tmp / "stderr.txt",
                      timeout_s)
            if repeat is not None:
                got.add(side.name, point, repeat, *read_result(out, point, argv), label)
            if progress is not None:
                elapsed = time.monotonic() - t0
                progress(done, len(plan), elapsed / done * (len(plan) - done), label)
            if until is not None and ends_round and until(got.rows, repeat + 1):
                runs = repeat + 1
                break

    meta = _meta(command, side_a, side_b, points, runs, started)
    meta["device"] = ", ".join(sorted(got.devices)) or None
    meta["warmup_per_side"] = 1 if warmup else 0
    meta["workload"] = got.workloads
    return AbResult(rows=got.rows, meta=meta, started=started, finished=meta["finished"])


@dataclass
class _Measured:
    """The rows measured so far, the devices they report and each side's workload."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    devices: set[str] = field(default_factory=set)
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, side: str, point: LoadPoint, repeat: int, row: dict[str, Any],
            device: str | None, key: dict[str, Any], label: str) -> None:
        same_workload(self.workloads, side, key, label)
        if device:
            self.devices.add(device)
        self.rows.append({"side": side, **point.to_row(), "repeat": repeat, **row})


def _checked_inputs(
    command: str,
    side_a: Side,
    side_b: Side,
    concurrencies: Sequence[int],
    rates: Sequence[float] | None,
    runs: int,
) -> tuple[list[str], list[LoadPoint]]:
    """The template's tokens and the load points, or EvidenceError before any run starts."""
    tokens = check_template(command)
    if side_a.name != "A" or side_b.name != "B":
        raise EvidenceError("run_alternating takes side A then side B")
    points = _load_points(concurrencies, rates)
    if points[0].kind == RATE and not any("{rate}" in t for t in tokens):
        raise EvidenceError(
            "a request-rate sweep needs a bench command that uses {rate} "
            "(e.g. --request-rate {rate}); this one would run the same load every time"
        )
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise EvidenceError(f"runs per side must be a positive integer, got {runs!r}")
    return tokens, points


def _env_file(tmp: Path, side: Side) -> Path:
    """The side's environment as a file a bench command can source ({env_file})."""
    path = tmp / f"side-{side.name}.env"
    path.write_text(env_file_text(side.env), encoding="utf-8")
    return path


def _alternating_plan(side_a: Side, side_b: Side, points: Sequence[LoadPoint], runs: int,
                      warmup: bool, by_round: bool = False
                      ) -> list[tuple[Side, LoadPoint, int | None, bool]]:
    """(side, load point, repeat or None for a warm-up, whether the run ends a round) in the
    order they run: the warm-ups A B, then per load point the pairs A B, B A, A B, … (the
    order turns each repeat); ``by_round``: round r runs pair r at every load point."""
    plan: list[tuple[Side, LoadPoint, int | None, bool]] = []
    if warmup:
        plan += [(side_a, points[0], None, False), (side_b, points[0], None, False)]
    order = [(r, p) for r in range(runs) for p in points] if by_round else \
        [(r, p) for p in points for r in range(runs)]
    for r, point in order:
        first, second = (side_a, side_b) if r % 2 == 0 else (side_b, side_a)
        plan += [(first, point, r, False), (second, point, r, point is points[-1])]
    return plan


def _side_argv(tokens, side: Side, point: LoadPoint, out: Path, env_file: Path,
               python: str) -> list[str]:
    """One run's command line: the template filled for this side and load point."""
    return render_command(
        tokens,
        {
            "out": str(out),
            "concurrency": str(int(point.value)) if point.kind == CONCURRENCY else "",
            "rate": format_rate(point.value) if point.kind == RATE else "",
            "engine_dir": str(side.engine_dir),
            "env_file": str(env_file),
            "python": python,
        },
        side.flag_words(),
    )


def _side_environ(side: Side) -> dict[str, str]:
    env = dict(os.environ)
    for k, v in side.env.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def _meta(
    command: str, a: Side, b: Side, points: list[LoadPoint], runs: int, started: str
) -> dict[str, Any]:
    keys = sorted(set(a.env) | set(b.env))
    env_diff = {
        k: {"A": a.env.get(k), "B": b.env.get(k)} for k in keys if a.env.get(k) != b.env.get(k)
    }
    flag_keys = sorted(set(a.flags) | set(b.flags))
    flags_diff = {
        k: {"A": a.flags.get(k), "B": b.flags.get(k)}
        for k in flag_keys if a.flags.get(k) != b.flags.get(k)
    }
    return {
        "command": command,
        "env": env_diff,
        **({"flags": flags_diff} if flags_diff else {}),
        "engine_dir": {"A": str(a.engine_dir), "B": str(b.engine_dir)},
        **(
            {"rates": [p.value for p in points]}
            if points[0].kind == RATE
            else {"concurrencies": [int(p.value) for p in points]}
        ),
        "runs": runs,
        **host_info(),
        "started": started,
        "finished": now_iso(),
    }


__all__ = [
    "AbResult",
    "DEFAULT_BENCH_COMMAND",
    "PLACEHOLDERS",
    "Side",
    "check_template",
    "resolve_bench",
    "env_file_text",
    "render_command",
    "run_alternating",
]
