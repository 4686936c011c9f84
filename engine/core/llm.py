"""The engine: scheduler + model runner + tokenizer, offline and as a served loop."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any
from collections.abc import Callable

from engine.core.block_manager import BlockManager
from engine.config import EngineError
from engine.knobs import EngineKnobs
from engine.core.scheduler import ScheduledBatch
from engine.core.scheduler import Scheduler
from engine.core.sequence import SamplingParams
from engine.core.sequence import Sequence


class LLMEngine:
    """One worker: ``generate`` for offline use, ``start`` for a background loop (server)."""

    def __init__(self, knobs: EngineKnobs, preset: str | None = None,
                 model_dir: str | None = None) -> None:
        import torch

        from engine.core.runner import ModelRunner
        from engine.tokenizer import load_tokenizer
        from engine.weights import build_model
        from engine.weights import resolve_device

        if resolve_device(knobs.device).type == "cpu":
            from engine.cpu_tuning import tune_malloc

            # Before the model is built: set once the heap is laid out, it measured no
            # gain. Per-step temporaries then stop costing page faults (see there).
            tune_malloc()
        from engine.cpu_tuning import choose_num_threads

        # 0 (the default) = one thread per core that other work is not keeping busy.
        self.num_threads = choose_num_threads(knobs.num_threads)
        torch.set_num_threads(self.num_threads)
        self.knobs = knobs
        self.model, self.cfg = build_model(preset, model_dir, knobs.dtype, knobs.seed,
                                              knobs.linear_backend, knobs.device,
                                              knobs.cpu_kernels, knobs.cpu_isa)
        self.tokenizer = load_tokenizer(model_dir)
        self.runner = ModelRunner(self.model, self.cfg, knobs)
        self.blocks = BlockManager(knobs.num_pages, knobs.page_size)
        self.scheduler = Scheduler(self.blocks, knobs.max_running_requests,
                                   knobs.prefill_chunk_tokens)
        self._futures: dict[int, Future[Sequence]] = {}
        self._commands: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stop = False
        # Called as on_step(batch, seconds) after each step (benchmarks/roofline.py times
        # the decode steps with it); None: nothing is called.
        self.on_step: Callable[[ScheduledBatch, float], None] | None = None

    @property
    def dtype_name(self) -> str:
        return str(self.runner.dtype).replace("torch.", "")

    @property
    def device_name(self) -> str:
        """Where the model runs, for reports: ``cpu`` or ``cuda:<GPU name>``."""
        device = self.runner.device
        if device.type == "cuda":
            import torch

            return f"cuda:{torch.cuda.get_device_name(device)}"
        return device.type

    def make_sequence(self, prompt_ids: list[int], params: SamplingParams) -> Sequence:
        """Validate token ids against the vocabulary and build a sequence."""
        if not prompt_ids:
            raise EngineError("the prompt is empty")
        vocab = self.cfg.vocab_size
        for t in prompt_ids:
            if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < vocab:
                raise EngineError(f"token id {t!r} is outside the vocabulary [0, {vocab})")
        limit = self.cfg.max_position_embeddings
        if len(prompt_ids) + params.max_new_tokens > limit:
            raise EngineError(
                f"prompt ({len(prompt_ids)}) + max_new_tokens ({params.max_new_tokens}) "
                f"exceeds the model's {limit} positions")
        return Sequence(list(prompt_ids), params, eos_id=self.tokenizer.eos_id)

    def step(self) -> bool:
        """Run one scheduled batch; False when there was nothing to run."""
        began = time.perf_counter()
        batch = self.scheduler.schedule()
        if batch is None:
            return False
        now = time.perf_counter()
        for seq in batch.seqs:
            if seq.start_time is None:
                seq.start_time = now
        tokens = self.runner.run(batch)
        done = time.perf_counter()
        self.scheduler.postprocess(batch, tokens, done)
        if self.on_step is not None:
            self.on_step(batch, time.perf_counter() - began)
        return True

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Sequence]:
        """Offline: run every prompt to completion with continuous batching."""
        seqs = [self.make_sequence(p, params) for p in prompts]
        for s in seqs:
            self.scheduler.add(s)
        while self.scheduler.has_work():
            if not self.step():
                raise EngineError("the scheduler cannot make progress (KV cache too small?)")
        self.scheduler.finished.clear()
        return seqs

    # ---- background loop (servers) ---------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="engine-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        self._wake.set()

    def submit(self, seq: Sequence, prefilled: bool = False) -> Future[Sequence]:
        """Hand a sequence to the loop; the future resolves when it finishes."""
        fut: Future[Sequence] = Future()

        def enqueue() -> None:
            self._futures[seq.seq_id] = fut
            if prefilled and seq.is_done():
                self.scheduler.finish(seq)  # max_new_tokens=1: the first token was all
            elif prefilled:
                self.scheduler.add_prefilled(seq)
            else:
                self.scheduler.add(seq)

        self.call(enqueue)
        return fut

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn`` on the loop thread between steps (all engine state lives there)."""
        fut: Future[Any] = Future()
        self._commands.put((fn, fut))
        self._wake.set()
        return fut

    def _loop(self) -> None:
        while not self._stop:
            while True:
                try:
                    fn, fut = self._commands.get_nowait()
                except queue.Empty:
                    break
                # Whatever a command raises goes to its caller; the loop keeps serving.
                try:
                    fut.set_result(fn())
                except Exception as e:  # noqa: BLE001
                    fut.set_exception(e)
            # A failed step must not kill the server: its requests fail, the loop goes on.
            try:
                progressed = self.step()
            except Exception as e:  # noqa: BLE001
                progressed = False
                for seq in list(self.scheduler.running) + list(self.scheduler.waiting):
                    self.scheduler.abort(seq, f"engine step failed: {e}")
            for seq in self.scheduler.finished:
                fut = self._futures.pop(seq.seq_id, None)
                if fut is not None:
                    fut.set_result(seq)
            self.scheduler.finished.clear()
            if not progressed and self._commands.empty():
                self._wake.wait(0.05)
                self._wake.clear()
