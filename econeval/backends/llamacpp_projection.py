"""The llama.cpp backend's projection of a run's time: its own scheduler (`llamacpp_batch`) run
dry over sampled chunks of every task, the jobs exactly as the run makes them (prefixes shared,
an option request and a generation of the same prompt merged, sequences admitted within the KV
budget, a chunk's tail), each `llama_decode` call costed by a model of this device's speed
measured now.

A call of t tokens with o outputs read, whose attention computes p (token, KV cell) pairs, costs
a + b·t + c·p + d·o seconds: a fixed cost per call, the weights per token, attention, reading and
picking from each output's logits. In a unified KV cache every token attends over every cell in
use (p = t·n); in per-sequence streams over its own stream's (the schedule's `pairs`). a, b, c and
d are fitted to a few timed calls of the real engine on synthetic tokens (a few thousand tokens).

Generated lengths are not known before the model runs: a dry run in which every generation stops
after its first token, and one in which every generation uses its whole budget, bound the time;
where the folder holds the task's earlier items, their generated lengths give the likely time.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .llamacpp_batch import Engine, Entry, JobSpec, Job, Shape


REPEATS, REPEAT_S = 5, 1.0  # the measurement is repeated, up to 5 times, while it has taken under a second
# The wide pass: as many sequences as the run decodes together (up to 64), each with a prompt of up to 512 tokens,
# then steps reading every one's logits: where a step's outputs and the cells in use cost (a GPU at --parallel 64,
# attention over a unified cache of 16k cells) and the small calls above cannot show it (on an H200 they fitted both
# at 0, and the projection came out 1.6-2.2x short). Made only when the fit of the small calls says it takes under
# WIDE_S: on a GPU (2.5 s there), and on a CPU for a small model only (the default model's whole measurement took
# 2.2-2.6 s with it and 2.5-2.8 s without, 2026-12-04: no cost above noise).
WIDE_SEQS, WIDE_PROMPT, WIDE_S = 64, 512, 3.0
PER_TOKEN = 1  # the cost per token's column in the fit (per call, per token, per token and cell, per output)


@dataclass(frozen=True)
class CostModel:
    """Seconds of one llama_decode call (see the module's docstring)."""

    per_call: float
    per_token: float
    per_token_cell: float  # per (token, KV cell) pair attention computes
    per_output: float

    def __call__(self, tokens: int, pairs: int, outputs: int) -> float:
        return self.per_call + self.per_token * tokens + self.per_token_cell * pairs + self.per_output * outputs

    def to_json(self) -> dict:
        return {"per_call_s": self.per_call, "per_token_s": self.per_token, "per_token_cell_s": self.per_token_cell,
                "per_output_s": self.per_output}

    @classmethod
    def measure(cls, engine: Engine) -> tuple["CostModel", float]:
        """Fitted to timed calls of `engine` (its KV cache cleared before and after; its counters
        left as they were); and the seconds the measurement took."""
        t_start = time.monotonic()
        before = (engine.n_evaluated, engine.n_generated, engine.n_decode_calls)
        seqs = max(1, min(4, engine.n_seq))
        room = engine.seq_cells - 16  # a sequence's cells (its stream's, in per-sequence streams), less the steps'
        long = max(16, min(1024, engine.n_cells // (4 * seqs), room))
        wide = max(1, min(WIDE_SEQS, engine.n_seq))
        wide_prompt = max(16, min(WIDE_PROMPT, min(engine.kv_budget, engine.n_cells) // (2 * wide), room))
        ids = [(7919 * k) % engine.n_vocab for k in range(1, max(4 * long, 8 * wide + wide_prompt) + 64)]
        rows: list[tuple[int, int, int, float]] = []  # tokens, (token, cell) pairs, outputs, seconds
        used = 0

        def timed(entries: list[Entry], outputs: list[int]) -> None:
            nonlocal used
            t0 = time.perf_counter()
            engine._decode(entries)
            for i in outputs:  # what the engine does with an output: a greedy pick over its logits
                int(np.argmax(engine._logits(i)))
            used += len(entries)
            rows.append((len(entries), engine.call.pairs(entries, used), len(outputs), time.perf_counter() - t0))

        def prompt(seq: int, start: int, n: int) -> tuple[int, int]:
            timed([(ids[start + k], k, (seq,), k == n - 1) for k in range(n)], [n - 1])
            return seq, n

        def steps(count: int, seqs_at: list[tuple[int, int]]) -> list[tuple[int, int]]:
            for s in range(count):
                timed([(ids[s], pos + s, (seq,), True) for seq, pos in seqs_at], list(range(len(seqs_at))))
            return [(seq, pos + count) for seq, pos in seqs_at]

        passes: list[list[tuple[int, int, int, float]]] = []
        try:
            # the same calls again while they took under REPEAT_S: each call's fastest time, so that a
            # moment of load on the machine does not count (a large model's single pass is long enough)
            while len(passes) < REPEATS and (not passes or time.monotonic() - t_start < REPEAT_S):
                rows, used = [], 0
                engine._clear()
                # prompts of growing length over more and more cells in use, then generation over them all
                steps(6, [prompt(seq, seq * 8, long // (seqs - seq)) for seq in range(seqs)])
                engine._clear()
                used = 0
                first = steps(6, [prompt(0, 0, 32)])  # one short sequence
                steps(6, first + [prompt(seq, seq, 38) for seq in range(1, seqs)])  # several short ones
                passes.append(rows)
            fastest = [(*row[:3], min(p[k][3] for p in passes)) for k, row in enumerate(passes[0])]
            small = cls.fit(fastest)
            cells = wide * wide_prompt
            if wide > seqs and wide * small(wide_prompt, wide_prompt * cells, 1) + 6 * small(wide, wide * cells, wide) < WIDE_S:
                engine._clear()
                rows, used = [], 0
                steps(6, [prompt(seq, seq * 8, wide_prompt) for seq in range(wide)])
                fastest += rows
        finally:
            engine._clear()
            engine.n_evaluated, engine.n_generated, engine.n_decode_calls = before
        return cls.fit(fastest), time.monotonic() - t_start

    @classmethod
    def fit(cls, rows: Sequence[tuple[int, int, int, float]]) -> "CostModel":
        """Least squares over (tokens, pairs, outputs, seconds) rows, every coefficient at least 0
        (a negative one is dropped and the rest fitted again), and the cost per token above 0. A
        machine under load can time its small calls nearly as slow as its large ones; a fit that
        gives the fixed costs all of that time puts tokens at 0 or below, and would cost a run of
        long prompts as one of short ones. The other terms then give way, the fixed cost per call
        first; left alone, the cost per token is the timed calls' seconds over their tokens (the
        measurement's whole time spread over its tokens), above 0 whenever a call took time."""
        x = np.array([[1.0, t, p, o] for t, p, o, _ in rows])
        y = np.array([s for *_, s in rows])
        keep = [0, 1, 2, 3]
        coef = np.zeros(4)
        while keep != [PER_TOKEN]:
            sol, *_ = np.linalg.lstsq(x[:, keep], y, rcond=None)
            low = {k for k, v in zip(keep, sol) if v < 0 or (k == PER_TOKEN and v <= 0)}
            if not low:
                coef[keep] = sol
                break
            others = (low - {PER_TOKEN}) or {next(k for k in keep if k != PER_TOKEN)}
            keep = [k for k in keep if k not in others]
        else:
            coef[PER_TOKEN] = y.sum() / max(1.0, x[:, PER_TOKEN].sum())
        return cls(*map(float, coef))


class _Dry(Engine):
    """The scheduler over a cost model instead of llama.cpp: the same admissions, prefixes and
    calls; a generation ends after the number of tokens `length(job)` says."""

    def __init__(self, like: Shape, cost: CostModel, length: Callable[[JobSpec], int]):  # noqa: D107 - no llama.cpp here
        self.n_ctx, self.n_seq, self.n_batch, self.n_cells, self.kv_budget = like.n_ctx, like.n_seq, like.n_batch, like.n_cells, like.kv_budget
        self.seq_cells, self.call = like.seq_cells, like.call
        self.cost, self.length = cost, length
        self.keeper = like.keeper
        self.seconds = 0.0
        self.n_evaluated = self.n_generated = self.n_decode_calls = self.n_set_back = self.n_copies = 0
        self.current = None

    def _clear(self) -> None:
        pass

    def _share(self, src: int, dst: int, upto: int) -> None:
        pass

    def _copy(self, src: int, dst: int) -> None:
        pass

    def _trim(self, slot: int, start: int) -> None:
        pass

    def _decode(self, entries: list[Entry]) -> None:
        assert self.current is not None
        self.seconds += self.cost(len(entries), self.current.pairs(entries, self.current.in_use()), sum(1 for e in entries if e[3]))
        self.n_evaluated += len(entries)
        self.n_decode_calls += 1

    def _logits(self, i: int) -> np.ndarray:
        return np.zeros(1, dtype=np.float32)

    def _prompt_done(self, job: Job, i: int) -> None:
        job.conts = [(o, c) for o, vs in job.options.items() for c in vs if len(c) > 1]
        if job.conts:
            job.state = "cont"
        elif job.spec.max_tokens and self.length(job.spec) > 0:
            job.state = "gen"
            self._step(job, self._logits(i))
        else:
            job.state = "done-pending"

    def _cont_done(self, job: Job, first: int, n: int) -> None:
        job.conts.pop(0)
        if not job.conts:
            job.options = {}
            job.state = "gen" if job.spec.max_tokens and self.length(job.spec) > 0 else "done-pending"

    def _step(self, job: Job, logits: np.ndarray) -> None:
        job.generated.append(0)
        self.n_generated += 1
        if len(job.generated) >= min(self.length(job.spec), job.spec.max_tokens) or job.pos + 1 >= self.n_ctx:
            job.state = "done-pending"


@dataclass
class ChunkCost:
    """A dry run of some chunks: seconds, prompt tokens evaluated (prefixes once), tokens generated."""

    seconds: float = 0.0
    prompt_tokens: int = 0
    generated: int = 0
    budget: int = 0

    def add(self, dry: _Dry, jobs: list[JobSpec]) -> None:
        self.seconds += dry.seconds
        self.prompt_tokens += dry.n_evaluated - dry.n_generated
        self.generated += dry.n_generated
        self.budget += sum(j.max_tokens for j in jobs)


def dry_run(shape: Shape, cost: CostModel, chunks: list[list[JobSpec]], length: Callable[[JobSpec], int],
            out: ChunkCost | None = None) -> ChunkCost:
    """What `chunks` (each a call's jobs) cost under `cost` with generations of `length` tokens, in
    an engine of `shape` (added to `out`)."""
    out = out if out is not None else ChunkCost()
    for jobs in chunks:
        dry = _Dry(shape, cost, length)
        dry.run(jobs)
        out.add(dry, jobs)
    return out


def sampled_length(lengths: Sequence[int], seed: int) -> Callable[[JobSpec], int]:
    """Generated lengths drawn from the measured ones (each job's draw fixed by its tokens)."""
    def length(spec: JobSpec) -> int:
        return random.Random(f"{seed}:{hash(tuple(spec.tokens[-16:]))}").choice(lengths)
    return length
