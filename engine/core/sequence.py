"""A request as the scheduler sees it (pure Python)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from dataclasses import field
from enum import Enum

_ids = itertools.count()


class SeqStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass
class SamplingParams:
    max_new_tokens: int = 16
    temperature: float = 0.0
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.max_new_tokens, int) or isinstance(self.max_new_tokens, bool) \
                or self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be a positive integer")
        if not isinstance(self.temperature, (int, float)) or isinstance(self.temperature, bool) \
                or not 0.0 <= float(self.temperature) <= 100.0:
            raise ValueError("temperature must be a number in [0, 100]")


@dataclass
class Sequence:
    """Tokens, KV pages and progress of one request.

    Invariant: the KV of ``tokens[:num_computed]`` is in the cache; the next forward feeds
    ``tokens[num_computed:]`` (many tokens = a prefill chunk, one token = a decode step).
    """

    prompt_ids: list[int]
    params: SamplingParams
    eos_id: int | None = None
    seq_id: int = field(default_factory=lambda: next(_ids))
    output_ids: list[int] = field(default_factory=list)
    block_table: list[int] = field(default_factory=list)
    num_computed: int = 0
    status: SeqStatus = SeqStatus.WAITING
    # Prefill role: keep the KV pages after the first token, for the transfer.
    hold_kv: bool = False
    finish_reason: str | None = None
    error: str | None = None
    num_preemptions: int = 0
    token_times: list[float] = field(default_factory=list)
    # When the sequence was first scheduled (offline bench: TTFT excludes queueing, as
    # bench_serving's max_concurrency does by not sending the request earlier).
    start_time: float | None = None

    @property
    def tokens(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def num_pending(self) -> int:
        """Tokens to feed before the next token can be sampled."""
        return self.num_tokens - self.num_computed

    def is_done(self) -> bool:
        if len(self.output_ids) >= self.params.max_new_tokens:
            self.finish_reason = "length"
            return True
        if (not self.params.ignore_eos and self.eos_id is not None and self.output_ids
                and self.output_ids[-1] == self.eos_id):
            self.finish_reason = "stop"
            return True
        return False
