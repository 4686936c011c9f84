"""Command line of the engine: ``generate``, ``bench``, ``serve`` (argparse; torch loads lazily).

Knobs come from the environment (``ENGINE_*``, see engine.knobs), read once here;
an invalid value is reported as ``error: ...`` with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine.config import EngineError
from engine.knobs import KnobError
from engine.knobs import load_knobs


def _model_flags(p: argparse.ArgumentParser, required: bool = True) -> None:
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--preset", choices=("tiny", "small"), help="built-in model, seeded weights")
    g.add_argument("--model", metavar="DIR", help="local HF checkpoint (config.json + "
                                                  "model.safetensors, Llama or Qwen2)")
    p.add_argument("--release", metavar="PIN", help="engine release whose knob defaults "
                   "apply, pinned as pip pins it: knob-ledger-engine==1.1.0 (engine.knobs)")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers")
    if not values:
        raise argparse.ArgumentTypeError("the list is empty")
    return values


def _positive_list(text: str) -> list[int]:
    values = _int_list(text)
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("values must be >= 1")
    return values


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return v


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine",
                                     description="The bundled prefill/decode LLM engine.")
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="greedy/sampled generation for one prompt")
    _model_flags(g)
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="prompt text")
    src.add_argument("--prompt-ids", type=_int_list, help="token ids, e.g. 1,2,3")
    g.add_argument("--max-new-tokens", type=_positive, default=16)
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--ignore-eos", action="store_true")
    g.add_argument("--json", action="store_true", help='print {"output_ids": [...]}')

    b = sub.add_parser("bench", help="offline or online throughput/latency benchmark")
    b.add_argument("--mode", choices=("offline", "online"), default="offline")
    b.add_argument("--url", help="online mode: server (router or worker) base URL")
    _model_flags(b, required=False)
    b.add_argument("--concurrency", type=_positive_list, default=[1, 8, 32])
    b.add_argument("--num-prompts", type=_positive, default=32)
    b.add_argument("--input-len", type=_positive, default=32)
    b.add_argument("--output-len", type=_positive, default=32)
    b.add_argument("--seed", type=int, default=0, help="prompt generator seed")
    b.add_argument("--json", metavar="FILE", help="write JSON lines here (default stdout)")

    s = sub.add_parser("serve", help="HTTP server (roles: both, prefill, decode, router)")
    s.add_argument("--role", choices=("both", "prefill", "decode", "router"), default="both")
    s.add_argument("--port", type=int, default=30000)
    s.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
    _model_flags(s, required=False)
    s.add_argument("--prefill", metavar="URL", help="router: prefill worker URL")
    s.add_argument("--decode", metavar="URL", help="router: decode worker URL")
    v = sub.add_parser("service", help="start/stop/restart one server detached, with a pid file",
                       usage="python -m engine service {start,stop,restart} --pid-file FILE "
                             "[--log FILE] [--grace S] [-- COMMAND...]")
    v.add_argument("action", choices=("start", "stop", "restart"))
    v.add_argument("--pid-file", required=True, metavar="FILE")
    v.add_argument("--log", metavar="FILE", help="server output (default: PID_FILE.log)")
    v.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and "
                                                             "SIGKILL when stopping")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if argv[:1] == ["service"] and "--" in argv:  # the supervised command, taken as is
        cmd, argv = argv[argv.index("--") + 1:], argv[:argv.index("--")]
    args = parser.parse_args(argv)
    if args.command == "service":
        from engine.tools.service import main as service

        if args.action != "stop" and not cmd:
            parser.error("service start/restart needs -- COMMAND...")
        return service(args.action, args.pid_file, args.log, args.grace, cmd)
    try:
        knobs = load_knobs(release=args.release)
        return {"generate": _generate, "bench": _bench, "serve": _serve}[args.command](
            parser, args, knobs)
    except (KnobError, EngineError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _engine(args: argparse.Namespace, knobs: Any) -> Any:
    from engine.core.llm import LLMEngine

    eng = LLMEngine(knobs, preset=args.preset, model_dir=args.model)
    reason = getattr(eng.model.ops, "reason", "")
    if eng.model.ops.name == "torch" and reason.startswith(("no C++", "ninja", "build failed")):
        # The machine cannot build the kernels: it runs the plain path, and says so once.
        print(f"note: fused CPU kernels off, eager torch ops: {reason}", file=sys.stderr)
    return eng


def _generate(parser: argparse.ArgumentParser, args: argparse.Namespace, knobs: Any) -> int:
    from engine.core.sequence import SamplingParams

    try:
        params = SamplingParams(args.max_new_tokens, args.temperature, args.ignore_eos)
    except ValueError as e:
        parser.error(str(e))
    eng = _engine(args, knobs)
    ids = args.prompt_ids if args.prompt_ids is not None else eng.tokenizer.encode(args.prompt)
    seq = eng.generate([ids], params)[0]
    if args.json:
        print(json.dumps({"output_ids": seq.output_ids}))
    else:
        print(eng.tokenizer.decode(seq.output_ids))
    return 0


def _bench(parser: argparse.ArgumentParser, args: argparse.Namespace, knobs: Any) -> int:
    from engine.tools import bench

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.mode == "online":
        if not args.url:
            parser.error("--mode online needs --url")
        prompts = bench.make_prompts(args.num_prompts, args.input_len, 256, args.seed)
        results = bench.bench_online(args.url.rstrip("/"), args.concurrency, prompts,
                                     args.output_len, progress)
        info = bench.server_info(args.url.rstrip("/"))
        extra = {"mode": "online", "url": args.url, **bench.knob_fields(knobs),
                 "server_info": info, "device": bench.server_device(info)}
    else:
        if not (args.preset or args.model):
            parser.error("--mode offline needs --preset or --model")
        eng = _engine(args, knobs)
        prompts = bench.make_prompts(args.num_prompts, args.input_len, eng.cfg.vocab_size,
                                     args.seed)
        results = bench.bench_offline(eng, args.concurrency, prompts, args.output_len, progress)
        extra = {"mode": "offline", "model": args.model or args.preset,
                 "dtype": eng.dtype_name, "device": eng.device_name,
                 "ops": eng.model.ops.describe(), "cpu_paths": eng.model.cpu_paths,
                 **bench.knob_fields(knobs)}
    extra.update(num_prompts=args.num_prompts, input_len=args.input_len,
                 output_len=args.output_len)
    bench.write_results(args.json, results, extra)
    return 0


def _serve(parser: argparse.ArgumentParser, args: argparse.Namespace, knobs: Any) -> int:
    """One server of the PD deployment.  The router only forwards HTTP: it never imports
    the worker, and so never torch (~1.1 s and ~300 MB of a router's start-up)."""
    from engine.serving.http import serve
    from engine.serving.info import startup_info

    if not 0 <= args.port <= 65535:
        parser.error("--port must be in [0, 65535]")
    if args.role == "router":
        from engine.serving.router import make_router_handler

        if not (args.prefill and args.decode):
            parser.error("--role router needs --prefill URL and --decode URL")
        handler = make_router_handler(args.prefill.rstrip("/"), args.decode.rstrip("/"),
                                      knobs.inflight_timeout_s,
                                      startup_info("router", None, knobs))
    else:
        from engine.serving.worker import Worker
        from engine.serving.worker import make_worker_handler

        if not (args.preset or args.model):
            parser.error(f"--role {args.role} needs --preset or --model")
        eng = _engine(args, knobs)
        eng.start()
        info = startup_info(args.role, args.model or args.preset, knobs)
        handler = make_worker_handler(Worker(eng, args.role, info))
    serve(handler, args.port, args.host)
    return 0
