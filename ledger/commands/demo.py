"""`ledger demo DIR`: the whole story, end to end, on the bundled engine.

:func:`prepare` lays out, in DIR:

    engine-repo/     a git checkout of the bundled engine (the engine/ package, one commit)
    deploy/          its serve scripts (serve_decode.sh, serve_prefill.sh, serve_router.sh)
    patches/         a perf patch and a bugfix patch against the engine (real diffs
                     shipped with the project: ledger/demo_patches/)
    ledger/          the workspace (engine_repo: ../engine-repo), managing serve_decode.sh

and returns the commands of the story, which the CLI runs one by one, printing each as a
transcript an operator could retype (``cd DIR``, then ``cd DIR/ledger``): show what the
bugfix knob fixes: with the prefill worker dropping every KV transfer
(``pd_check.py --drop-transfers``, real servers from the serve scripts on loopback) the
client gets no answer in 10 s, the decode worker holding the request for its 30 s timeout;
record the bugfix knob (5 s) and the same check is refused with HTTP 504 in ~5 s (the demo
expects exit 1 then 0, so a bugfix that did nothing stops it; both checks append what they
saw to ``DIR/docs/bugfix-check.md``); record a perf and a bugfix patch; record a perf knob
and measure it A/B on the ``tiny`` preset at a 3840-token context, one sequence at a time
(where split-K partitioning matters: see ``PERF_BENCH``), on decode tok/s, 8 pairs and up
to 4 more until decided
— last of the changes, so its evidence describes the engine and knobs the story ends on
(current, not ``[stale]``); the incident (suspect,
revert --perf-only); what is off the table; a bisect over the perf entries with the
harness check through the client's faulty proxy (shipped in deploy/: it drops requests
once a multi-turn conversation grows), which finds the failure persists with every perf
entry reverted and clears the suspect with that as the reason; the claw-back; the same
check against the router directly, which passes; the rendered docs.

The decode server runs for real through the story: the demo starts it from the managed
serve script (``python -m engine service``, engine code from ``engine-repo/``, an
ephemeral loopback port, pid file and log in ``run/``), the workspace knows its live probe,
restart hook and health check (``ledger target set``), the claw-back is
``restore --perf-only --restart`` followed by ``status --live``, and a deliberately bad
knob value (one KV page: the server refuses to start) is rolled back by the health gate.
The caller stops the server at the end (:attr:`Demo.stop`), whatever happened.

Retypeable: every step's paths are relative to the workspace and the CLI runs the steps
from there, with the interpreter ledger runs on first on PATH (as an activated venv has
it), so ``python`` and ``ledger`` in the transcript are what ran.  The server is started,
restarted and stopped through ``run/decode-service.sh`` (written here, like a unit file:
interpreter, port and engine path fixed in it), so the restart hook in ``ledger.yaml`` is
``bash ../run/decode-service.sh restart``.  Re-runnable: DIR is marked (``MARKER``), and a
demo run on a directory an earlier demo laid out replaces it, stopping its server first.
The story ends with nothing reverted but the health gate's rolled-back value, which the
docs show as *failed its health check* (held back, never offered as a claw-back).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ledger.commands.setup import init_workspace
from ledger.errors import Refused
from ledger.store import wsgit

DEMO_PATCHES = Path(__file__).resolve().parent.parent / "demo_patches"
SCRIPTS = ("serve_decode.sh", "serve_prefill.sh", "serve_router.sh")
TOOLS = Path(__file__).resolve().parent.parent / "demo_tools"
# The harness check, the client's faulty proxy, and a check that starts the deployment
# from the serve scripts (knobs are read at start-up) and runs the harness through it.
DEMO_TOOLS = ("harness.py", "faulty_proxy.py", "pd_check.py")

# The shipped serve script pins ENGINE_DECODE_TARGET_CTAS=16 (sized for a GPU); on a CPU
# the parallel units are its cores, and at c1 16 cuts a long context into 8 split-K
# partitions: a gather of the whole context per layer per step, more small ops and a
# combine, for nothing (unsplit, decode appends the new token to its dense KV blocks
# instead: engine.core.dense_kv).  The A/B runs where that matters, a 3840-token context
# at c1 (one prompt, 192 new tokens: ~0.15 s of prefill and ~0.3 s of decode a run).
# Measured (1 thread, load ~1.8, interleaved, 4 pairs): decode tok/s of CTAS=2 +37..+98%
# over 16, no overlap (at 3072 tokens +30..+50%; two 2048-token prompts of 128 new tokens
# measured +19% output tok/s with a CI from -8%); at the 32-token contexts of the default
# bench it was +10% with a CI reaching down to +2% (a `gain` at risk on a shared machine),
# and with the perf patch's 64-token shortest partition nothing at such contexts was split
# at all.  At c8 and above the batch already exceeds both values, so the A/B runs at c1
# only.
PERF_KNOB = ("ENGINE_DECODE_TARGET_CTAS", "2")
PERF_CONCURRENCY = "1"
# The A/B pins one intra-op thread: the serve script's ENGINE_NUM_THREADS=0 samples the
# machine's load at each start, and on a shared machine picked 1 thread in some runs and 2
# in others (a 30% swing at c1, as large as the knob's effect), so each side would
# measure the thread choice as much as the knob.  1 thread is what the choice makes with
# one core busy, and it does not stall when a neighbour takes a core.
# The prompt is prefilled in one chunk (both sides alike): 512-token chunks took ~450 ms of
# each run, one chunk ~125 ms (the demo must stay under 2 minutes).
PERF_BENCH = ("env ENGINE_NUM_THREADS=1 ENGINE_PREFILL_CHUNK_TOKENS=4096 {python} -m engine "
              "bench --mode offline --preset tiny "
              "--concurrency {concurrency} --num-prompts 1 --input-len 3840 --output-len 192 "
              "--json {out}")
# Judged on one sequence's decode speed at its fastest step (``peak_decode_throughput`` of
# the bench: 1000 / the fastest decode step's ms; engine.tools.bench.DecodeStepClock says
# why): the knob changes decode steps, not the prefill, whose share of each run only adds
# noise to tok/s, and on the shared 2-core machines the demo runs on, a run's median step
# measures the neighbours as much as the knob.  Measured (load ~14, 6 A/A pairs): per-pair
# spread 12-27% on the median TPOT (``decode_throughput``), 2-7% on the fastest step;
# the knob itself +42..+46% on the fastest step over 4 pairs.
PERF_METRIC = "peak_decode_throughput"
# 8 runs a side, run as interleaved A/B pairs: the verdict is the interval of the
# within-pair change against the tolerance (ledger.evidence.stats), so a shared machine's
# slow spell, which slows both runs of a pair, cancels.  Each run is ~2.5-3 s (most of it
# the interpreter and torch starting), 18 with warm-ups.  Five demos at load ~2 all read
# `gain` (+54.9..+81.4%) under the earlier rank test; benchmarks/ab_stability.py tallies it.
DEMO_RUNS = 8
# Sequential (`ab --until-decided`): after the 8 pairs, up to DEMO_MORE_PAIRS more, one at a
# time, until the verdict is decided (ledger.evidence.sequential).  The knob's +40% is
# decided at the first look (8 pairs, at the stricter 99.375% a first look gets) unless a
# neighbour slowed a run or two; such a demo then runs a few more pairs (8 runs of ~3 s on
# a quiet machine, 25 s at most; twice that under a load of 15) instead of ending
# `inconclusive`.  benchmarks/ab_stability.py tallies it.
DEMO_MORE_PAIRS = 4
PERF_ID = "decode-target-ctas-" + PERF_KNOB[1]  # the id `record` derives from the title
BUGFIX_KNOB = ("ENGINE_INFLIGHT_TIMEOUT_S", "5")
# The fault check's client waits this long per request: past the fixed timeout (5 s),
# short of the shipped one (30 s), so "no answer" before the fix is a hang, not slowness.
FAULT_CLIENT_TIMEOUT_S = 10


# A directory holding this file was laid out by `ledger demo`: running the demo there again
# replaces it (its server stopped first), so the README's command works twice in a row.
MARKER = ".knob-ledger-demo"
CHILDREN = ("engine-repo", "deploy", "patches", "ledger", "docs", "run", MARKER)
# Every path the transcript shows is relative to the workspace (``cd DIR/ledger``), and the
# demo runs its steps from there, so each printed command is exactly what ran.
DEPLOY, RUN, PATCHES, ENGINE_REPO, DOCS = "../deploy", "../run", "../patches", "../engine-repo", \
    "../docs"
SERVICE = ("bash", f"{RUN}/decode-service.sh")


@dataclass(frozen=True)
class Step:
    note: str
    args: tuple[str, ...]
    expect: int = 0  # the exit code the story expects (the health-gate rollback exits 1)
    command: tuple[str, ...] = ()  # not a ledger command: run as is (argv); exit `expect`
    wait_url: str = ""  # after ``command``: wait until this URL answers
    pid_file: str = ""  # ...failing at once if the process this names exits first
    expected_why: str = ""  # said right after a step that exits non-zero on purpose


@dataclass(frozen=True)
class Demo:
    root: Path
    workspace: Path
    steps: tuple[Step, ...]
    stop: tuple[str, ...] = SERVICE + ("stop",)  # stops the demo's server (from the workspace)
    replaced: bool = False  # a previous demo's directory was replaced


def _service_script(root: Path) -> tuple[str, Path]:
    """Write run/decode-service.sh (start|stop|restart the decode server, as a unit file would
    run it: port, interpreter and engine path fixed here) and return its URL and pid file."""
    import shlex
    import socket
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = root / "run"
    run.mkdir(parents=True, exist_ok=True)
    q = shlex.quote
    control = (f"{q(sys.executable)} -m engine service \"$1\" --pid-file {q(str(run / 'decode.pid'))} "
               f"--log {q(str(run / 'decode.log'))} --grace 10")
    launch = (f"env PORT={port} PYTHON={q(sys.executable)} "
              f"PYTHONPATH={q(str(root / 'engine-repo'))} bash "
              f"{q(str(root / 'deploy' / 'serve_decode.sh'))}")
    script = run / "decode-service.sh"
    script.write_text(
        "#!/usr/bin/env bash\n"
        "# The demo's decode server: start | stop | restart (written by `ledger demo`).\n"
        "set -eu\n"
        f'if [ "$1" = stop ]; then exec {control}; fi\n'
        f"exec {control} -- {launch}\n")
    script.chmod(0o755)
    return f"http://127.0.0.1:{port}", run / "decode.pid"


def _engine_package() -> Path:
    import engine

    return Path(engine.__file__).resolve().parent


def _ignore(directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))}


def _clear(root: Path, force: bool) -> bool:
    """Make ``root`` ready for a demo; True when a previous demo there was replaced."""
    import subprocess

    if root.exists() and not root.is_dir():
        raise Refused(f"{root} exists and is not a directory")
    if not root.exists() or not any(root.iterdir()):
        return False
    previous = (root / MARKER).is_file()
    if not previous and not force:
        raise Refused(f"{root} is not empty and holds no earlier demo: pick an empty "
                      "directory or pass --force")
    service = root / "run" / "decode-service.sh"
    if service.is_file():  # an earlier demo's server, if one is still up
        subprocess.run(["bash", str(service), "stop"], capture_output=True, timeout=60,
                       check=False)
    for child in CHILDREN:
        target = root / child
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
    return previous


def prepare(directory: Path, force: bool = False, runs: int = DEMO_RUNS) -> Demo:
    """Lay out the demo in ``directory`` and return the story's commands.

    A directory an earlier demo laid out (it holds ``.knob-ledger-demo``) is replaced, its
    server stopped first; any other non-empty directory needs ``force`` (then only the
    demo's own folders in it are replaced).
    """
    root = Path(directory).absolute()
    replaced = _clear(root, force)
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("laid out by `ledger demo`; running it here again replaces it\n",
                            encoding="utf-8")

    repo = root / "engine-repo"
    shutil.copytree(_engine_package(), repo / "engine", ignore=_ignore)
    (repo / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    wsgit.init(repo)
    wsgit.commit(repo, ["engine", ".gitignore"], "bundled engine, as shipped with knob ledger\n")

    deploy = root / "deploy"
    deploy.mkdir()
    for name in SCRIPTS:
        shutil.copy2(repo / "engine" / "scripts" / name, deploy / name)
    patches = root / "patches"
    patches.mkdir()
    for name in ("perf.patch", "bugfix.patch"):
        shutil.copy2(DEMO_PATCHES / name, patches / name)
    for name in DEMO_TOOLS:
        shutil.copy2(TOOLS / name, deploy / name)

    # Named roots: ledger.yaml writes deploy:serve_decode.sh and engine: (no absolute path
    # of this machine), so the workspace could be pushed and cloned as it is.
    ws = init_workspace(root / "ledger", str(repo),
                        roots={"deploy": "../deploy", "engine": "../engine-repo"})
    url, _ = _service_script(root)
    return Demo(root, ws, _story(runs, url), replaced=replaced)


def harness_check(via_proxy: bool) -> str:
    """The bisect check of the demo: start the deployment, run the multi-turn harness."""
    import shlex

    return shlex.join(_pd_check() + (["--via-proxy"] if via_proxy else []))


def fault_check() -> tuple[str, ...]:
    """The bugfix's check: every KV transfer dropped, the client must get a fast error."""
    return (*_pd_check(), "--drop-transfers", "--rounds", "1", "--timeout",
            str(FAULT_CLIENT_TIMEOUT_S), "--report", f"{DOCS}/bugfix-check.md")


def _pd_check() -> list[str]:
    # `python`: the demo puts the interpreter ledger runs on first on PATH, as an
    # activated venv does (see ledger.cli.docs.demo).
    return ["python", f"{DEPLOY}/pd_check.py", "--deploy", DEPLOY, "--engine-path", ENGINE_REPO]


def _story(runs: int, url: str) -> tuple[Step, ...]:
    """The demo's commands in order: the changes recorded, then the incident and its end."""
    return _changes(runs, url) + _incident()


def _changes(runs: int, url: str) -> tuple[Step, ...]:
    import shlex

    perf_knob, perf_value = PERF_KNOB
    fix_knob, fix_value = BUGFIX_KNOB
    return (
        Step("put the decode serve script under management",
             ("target", "add", "decode", f"{DEPLOY}/serve_decode.sh", "--format", "bash")),
        Step("how to see the running decode server, restart it, and know it is healthy "
             f"({RUN}/decode-service.sh starts the serve script on port {url.rsplit(':', 1)[1]})",
             ("target", "set", "decode", "--live", f"pid_file={RUN}/decode.pid",
              "--restart", shlex.join(SERVICE + ("restart",)),
              "--health-url", f"{url}/health", "--health-timeout", "120")),
        Step("start the decode server from its serve script", (),
             command=SERVICE + ("start",), wait_url=f"{url}/health",
             pid_file=f"{RUN}/decode.pid"),
        Step("the stuck-transfer bug: the prefill worker drops every KV transfer; the client "
             f"gets no answer in {FAULT_CLIENT_TIMEOUT_S}s (decode waits 30s for the KV)",
             (), command=fault_check(), expect=1,
             expected_why="the hang this bugfix is for: no answer before the client gave up"),
        Step("a bugfix knob: fail stuck KV transfers fast instead of wedging the queue",
             ("record", "knob", "decode", f"{fix_knob}={fix_value}", "--class", "bugfix",
              "--title", f"inflight transfer timeout {fix_value}s",
              "--why", "a transfer stuck for 30s held decode pages and stalled admission")),
        Step("the same fault with the bugfix: refused fast with an error the client can act on",
             (), command=fault_check()),
        Step("a perf patch to the engine",
             ("record", "patch", f"{PATCHES}/perf.patch", "--class", "perf",
              "--title", "fewer, longer split-K partitions on CPU",
              "--why", "below 64 tokens a partition costs more in combine than it gains")),
        Step("a bugfix patch to the engine",
             ("record", "patch", f"{PATCHES}/bugfix.patch", "--class", "bugfix",
              "--title", "refuse non-boolean ignore_eos",
              "--why", "bool('false') is True: clients asking not to ignore EOS got the opposite")),
        Step("a perf knob: size decode attention's split-K for 2 CPU cores, not a GPU",
             ("record", "knob", "decode", f"{perf_knob}={perf_value}", "--class", "perf",
              "--title", f"decode target CTAS {perf_value}",
              "--why", "16 cut a long context into 8 partitions at c1: a gather a step, "
                       "more ops, no parallelism a 2-core CPU can use")),
        Step("measure the perf knob: A = reverted, B = applied, alternating",
             ("ab", PERF_ID, "--runs", str(runs), *_until_decided(runs),
              "--concurrency", PERF_CONCURRENCY, "--bench", PERF_BENCH, "--metric",
              PERF_METRIC)),
    )


def _until_decided(runs: int) -> tuple[str, ...]:
    """The demo's A/B is sequential (``DEMO_MORE_PAIRS`` more pairs at most) from 3 pairs,
    the fewest that can be decided; fewer (a quick ``--runs 2``) run as asked."""
    if runs < 3:
        return ()
    return ("--until-decided", "--max-runs", str(runs + DEMO_MORE_PAIRS))


def _incident() -> tuple[Step, ...]:
    return (
        Step("the ledger so far (the A/B ran last, on the engine and knobs as they are "
             "now, so its evidence is current)", ("list",)),
        Step("the incident: the harness hangs; the newest perf change is the prime suspect",
             ("suspect", PERF_ID, "--why", "harness hangs after several rounds")),
        Step("...and every other perf change comes off the table too",
             ("revert", "--perf-only", "--why", "incident: harness hangs; bisecting perf")),
        Step("what is off the table, and why", ("diff",)),
        Step("the harness still fails. Is the cause among the perf entries? Bisect them: each "
             "check starts the servers from the serve scripts and runs the harness through the "
             "client's proxy",
             ("bisect", "--class", "perf", "--clear-suspects", "--timeout", "300",
              "--check", harness_check(via_proxy=True))),
        Step("claw the perf back, with its evidence, and restart the server onto it",
             ("restore", "--perf-only", "--restart")),
        Step("the running decode server now runs every knob of its file",
             ("status", "--live")),
        Step("the same check against the router directly passes: the proxy was it",
             ("bisect", "--class", "perf", "--timeout", "300",
              "--check", harness_check(via_proxy=False))),
        Step("nothing is off the table any more", ("diff",)),
        Step("every entry against what is live", ("status",)),
        Step("a bad value (one KV page: the server cannot start) is rolled back by the "
             "health gate", ("record", "knob", "decode", "ENGINE_NUM_PAGES=1", "--class",
                             "perf", "--title", "one KV page", "--no-validate", "--restart"),
             expect=1, expected_why="the health gate refused the value and put the file and "
             "the server back; the entry stays reverted, marked suspected, and the docs show "
             "it as failed its health check"),
        Step("...and the server answers again, on the configuration before it",
             ("status", "--live")),
        Step("the change history as docs", ("render", "--out", DOCS)),
        Step("the audit trail", ("log",)),
    )
