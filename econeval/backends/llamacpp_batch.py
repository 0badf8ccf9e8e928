"""A deterministic multi-sequence scheduler over llama.cpp's batched decode (`llama_decode` with
one sequence id per request in a unified KV cache).

One call of `Engine.run(specs)` evaluates a list of jobs (prompt scoring and greedy generation):

- The KV cache is cleared first, so what a call computes depends on its job list alone (llama.cpp's
  logits depend on batch composition; this makes them a pure function of the list).
- A prefix shared by at least two jobs of the call is evaluated once, alone, into a reserved
  sequence and copied (cells shared, not recomputed) into each job's sequence.
- Up to `n_seq` jobs are active. Each `llama_decode` call carries, for the active jobs in
  admission order, their remaining prompt tokens (logits only at a prompt's last token), the next
  token of each generating job, or an option continuation; at most `n_batch` tokens. A job that
  finishes frees its sequence and the next job in the list takes it (continuous batching).
  Jobs are admitted in list order, and only while their KV cells (prompt + tokens they may
  generate) fit: no job is ever cut short by another; and while the cells in use stay within
  `kv_budget` (attention costs grow with every cell in use: on a CPU, long prompts run fewer at a
  time). One shared prefix at a time: jobs of a new prefix wait for the current one's to finish.
- Log-softmax in float64 only where log-probabilities are read; greedy argmax on llama.cpp's
  float32 logits; text decoded incrementally (no re-detokenising of the whole output).
"""

from __future__ import annotations

import codecs
import math
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..signals import model_step, raise_if_stopped, stop_requested


@dataclass
class JobSpec:
    """What to evaluate: a prompt, and option scoring at its end and/or greedy generation."""

    tokens: list[int]  # the whole prompt (BOS included)
    n_prefix: int = 0  # leading tokens shared with other jobs through the prefix sequence
    max_tokens: int = 0  # 0: score only
    stop: tuple[str, ...] = ()
    stop_after_text: bool = True
    stop_regex: str | None = None
    repeat_penalty: float = 1.0
    end_tokens: tuple[int, ...] = ()  # tokens that end the generation as "closed" (a reasoning's end marker), kept in the text
    # option scoring at the end of the prompt: option → token continuations (variants; the best counts)
    options: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)


@dataclass
class JobResult:
    text: str = ""
    n_generated: int = 0
    finish: str = "stop"
    scores: dict[str, float] = field(default_factory=dict)
    top: float | None = None
    error: str | None = None


@dataclass
class _Job:
    """The engine's state of one job while it runs (private to Engine.run)."""

    spec: JobSpec
    res: JobResult
    index: int
    n_prefix: int  # the prefix actually shared (0 when no other job of the call has it)
    options: dict[str, list[tuple[int, ...]]]  # what is left to score
    slot: int = -1
    pos: int = 0
    pending: list[int] = field(default_factory=list)
    state: str = "queued"  # queued | prompt | cont | gen | done-pending | done
    generated: list[int] = field(default_factory=list)
    conts: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    base_logp: dict = field(default_factory=dict)
    reserve: int = 0
    seen: np.ndarray | None = None
    decoder: Any = None
    next_token: int = -1


def logsumexp(logits: np.ndarray) -> float:
    """log Σ exp(logits), in one pass (exp in float32, summed in float64); a token's
    log-probability is then logits[token] - logsumexp (no float64 copy of the vocabulary)."""
    m = float(logits.max())
    if not math.isfinite(m):
        return math.nan
    return m + math.log(float(np.exp(logits - np.float32(m)).sum(dtype=np.float64)))


class _Call:
    """The scheduler state of one Engine.run call: the queue, the free sequences, the active jobs,
    the shared prefix in the prefix sequence and the KV cells reserved."""

    def __init__(self, engine: "Engine", jobs: list[_Job], on_done: Callable[[int], None] | None):
        self.e, self.jobs, self.on_done = engine, jobs, on_done
        self.queue = deque(range(len(jobs)))
        self.free = list(range(engine.n_seq))
        self.active: list[_Job] = []
        self.current: dict | None = None  # the prefix in the prefix sequence: {"key", "refs"}
        self.owner: dict[int, dict] = {}  # job index → the prefix evaluation its sequence shares
        self.used = 0  # KV cells reserved: active jobs' own cells, and each live prefix evaluation's

    def live_prefix_cells(self) -> int:
        live = {id(i): len(i["key"]) for i in self.owner.values()}
        if self.current is not None:
            live[id(self.current)] = len(self.current["key"])
        return sum(live.values())

    def release(self, job: _Job) -> None:
        e = self.e
        e.L.llama_memory_seq_rm(e.mem, job.slot, -1, -1)
        self.used -= job.reserve
        inst = self.owner.pop(job.index, None)
        if inst is not None:
            inst["refs"] -= 1
            if inst["refs"] == 0 and inst is not self.current:
                self.used -= len(inst["key"])
        self.free.append(job.slot)
        self.free.sort()
        job.state = "done"
        self.active.remove(job)
        if self.on_done:
            self.on_done(job.index)

    def _drop_prefix(self) -> None:
        e = self.e
        e.L.llama_memory_seq_rm(e.mem, e.prefix_seq, -1, -1)

    def admit(self) -> None:
        """Admit jobs in order while a sequence and their KV cells are free."""
        e = self.e
        while self.queue and self.free:
            job = self.jobs[self.queue[0]]
            key = tuple(job.spec.tokens[: job.n_prefix]) if job.n_prefix else None
            fresh = key is not None and (self.current is None or self.current["key"] != key)
            if fresh and self.active and any(a.n_prefix for a in self.active):
                break  # one shared prefix at a time: its jobs finish before another prefix comes in
            n_key = len(key) if key is not None and fresh else 0
            need = job.reserve + n_key
            # hard: the reservations (prompt + every token a job may generate) fit the context;
            # soft: the cells in use now plus this prompt stay within the attention budget
            in_use = sum(len(a.spec.tokens) - a.n_prefix + a.res.n_generated for a in self.active) + self.live_prefix_cells()
            soft = in_use + len(job.spec.tokens) - job.n_prefix + n_key
            if self.used + need > e.n_ctx or soft > e.kv_budget:
                if self.active:
                    break
                # alone: make room; a job of another prefix, or of none, needs the kept prefix's cells
                if self.current is not None and (fresh or key is None):
                    self._drop_prefix()
                    self.used -= len(self.current["key"])
                    self.current = None
            self.queue.popleft()
            job.slot = self.free.pop(0)
            if key:
                if fresh:
                    if self.current is not None:
                        self._drop_prefix()
                        if self.current["refs"] == 0:
                            self.used -= len(self.current["key"])
                    for s in range(0, len(key), e.n_batch):  # the prefix alone, in its own calls
                        e._decode([(t, s + k, e.prefix_seq, False) for k, t in enumerate(key[s:s + e.n_batch])])
                    self.current = {"key": key, "refs": 0}
                    self.used += len(key)
                e.L.llama_memory_seq_cp(e.mem, e.prefix_seq, job.slot, -1, -1)
                assert self.current is not None  # made above, or the same prefix as the last job's
                self.current["refs"] += 1
                self.owner[job.index] = self.current
            self.used += job.reserve
            job.pos = job.n_prefix
            job.pending = list(job.spec.tokens[job.n_prefix:])
            job.state = "prompt"
            self.active.append(job)

    def batch(self) -> tuple[list[tuple[int, int, int, bool]], list[tuple[_Job, int, int]]]:
        """One decode call over the active jobs, in admission order: (token, position, sequence,
        wants logits) entries, and (job, first output index, how many) to read back."""
        entries: list[tuple[int, int, int, bool]] = []
        outputs: list[tuple[_Job, int, int]] = []
        cap = self.e.n_batch
        for job in self.active:
            if cap <= 0:
                break
            if job.state == "prompt":
                take = job.pending[:cap]
                done = len(take) == len(job.pending)
                for k, t in enumerate(take):
                    entries.append((t, job.pos + k, job.slot, done and k == len(take) - 1))
                if done:
                    outputs.append((job, len(entries) - 1, 1))
                job.pos += len(take)
                job.pending = job.pending[len(take):]
                cap -= len(take)
            elif job.state == "gen":
                entries.append((job.next_token, job.pos, job.slot, True))
                outputs.append((job, len(entries) - 1, 1))
                job.pos += 1
                cap -= 1
            elif job.state == "cont":
                _, cont = job.conts[0]
                body = cont[:-1]
                if len(body) > cap and entries:
                    break
                first = len(entries)
                for k, t in enumerate(body):
                    entries.append((t, job.pos + k, job.slot, True))
                outputs.append((job, first, len(body)))
                cap -= len(body)
        return entries, outputs


class Engine:
    def __init__(self, llama_cpp, ctx, vocab, n_vocab: int, n_ctx: int, n_seq: int, n_batch: int,
                 piece: Callable[[int], bytes], kv_budget: int | None = None):
        self.L = llama_cpp
        self.ctx, self.vocab, self.n_vocab, self.n_ctx = ctx, vocab, n_vocab, n_ctx
        self.n_seq, self.n_batch = n_seq, n_batch
        self.prefix_seq = n_seq  # the reserved sequence holding a shared prefix
        self.mem = llama_cpp.llama_get_memory(ctx)
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq + 1)
        self.piece = piece
        self.n_evaluated = 0  # tokens sent through llama_decode
        self.n_generated = 0
        self.n_decode_calls = 0
        # KV cells the active jobs may use together when a new one is admitted. Attention runs over
        # every cell in use, so a larger pool makes each token dearer: long prompts run fewer at a time.
        self.kv_budget = min(n_ctx, kv_budget or n_ctx)
        # a stop (SIGINT / SIGTERM / SIGHUP) ends a decode between graph nodes, not at its end: llama.cpp
        # asks this between nodes (on the CPU; a GPU graph runs whole) and llama_decode returns 2
        self._abort = llama_cpp.ggml_abort_callback(lambda _data: stop_requested() is not None)
        llama_cpp.llama_set_abort_callback(ctx, self._abort, None)

    def close(self) -> None:
        if self.batch is not None:
            self.L.llama_batch_free(self.batch)
            self.batch = None

    # ---- low level ---------------------------------------------------------------------------
    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """entries: (token, position, sequence, wants logits)."""
        b = self.batch
        for i, (tok, pos, seq, out) in enumerate(entries):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = out
        b.n_tokens = len(entries)
        with model_step():
            rc = self.L.llama_decode(self.ctx, b)
        raise_if_stopped()  # aborted by the callback, or a signal came as it ended: the chunk in flight is dropped
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        self.n_evaluated += len(entries)
        self.n_decode_calls += 1

    def _logits(self, i: int) -> np.ndarray:
        ptr = self.L.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    # ---- one call ----------------------------------------------------------------------------
    def run(self, specs: Sequence[JobSpec], on_done: Callable[[int], None] | None = None) -> list[JobResult]:
        """Evaluate the jobs; their results in order. `on_done(i)` as job i finishes."""
        self.L.llama_memory_clear(self.mem, True)
        counts: dict[tuple, int] = {}
        for sp in specs:
            if sp.n_prefix:
                counts[tuple(sp.tokens[: sp.n_prefix])] = counts.get(tuple(sp.tokens[: sp.n_prefix]), 0) + 1
        # a prefix of one job is no shared prefix
        jobs = [_Job(sp, JobResult(), n, sp.n_prefix if sp.n_prefix and counts[tuple(sp.tokens[: sp.n_prefix])] >= 2 else 0,
                     dict(sp.options)) for n, sp in enumerate(specs)]
        for j in jobs:
            cont_len = max((len(c) for vs in j.options.values() for c in vs), default=1)
            j.reserve = min(len(j.spec.tokens) - j.n_prefix + max(j.spec.max_tokens, cont_len - 1), self.n_ctx)
        call = _Call(self, jobs, on_done)
        while call.queue or call.active:
            call.admit()
            entries, outputs = call.batch()
            if not entries:
                raise RuntimeError("the scheduler made no progress")  # cannot happen: a job alone always fits
            self._decode(entries)
            for job, first, n in outputs:
                if job.state == "prompt":
                    self._prompt_done(job, first)
                elif job.state == "gen":
                    self._step(job, self._logits(first))
                else:
                    self._cont_done(job, first, n)
                if job.state == "done-pending":
                    call.release(job)
        return [j.res for j in jobs]

    # ---- per job -----------------------------------------------------------------------------
    def _prompt_done(self, job: _Job, i: int) -> None:
        logits = self._logits(i)
        if job.options:
            lse = logsumexp(logits)
            job.res.top = float(logits.max()) - lse
            if not math.isfinite(job.res.top):
                job.res.error = "the model produced non-finite logits"
                job.state = "done-pending"
                return
            for opt, variants in job.options.items():
                job.res.scores[opt] = max(float(logits[c[0]]) - lse for c in variants if len(c) == 1) \
                    if any(len(c) == 1 for c in variants) else -math.inf
                job.conts += [(opt, c) for c in variants if len(c) > 1]
            if job.conts:
                job.base_logp = {c[0]: float(logits[c[0]]) - lse for _, c in job.conts}
                job.state = "cont"
                return
        if job.spec.max_tokens:
            self._start_generation(job, logits)
        else:
            job.state = "done-pending"

    def _cont_done(self, job: _Job, first: int, n: int) -> None:
        opt, cont = job.conts.pop(0)
        total = job.base_logp[cont[0]]
        for k in range(n):
            logits = self._logits(first + k)
            total += float(logits[cont[k + 1]]) - logsumexp(logits)
        if math.isnan(total):
            job.res.error = "the model produced non-finite logits"
        job.res.scores[opt] = max(job.res.scores.get(opt, -math.inf), total)
        self.L.llama_memory_seq_rm(self.mem, job.slot, job.pos, -1)  # back to the end of the prompt
        if job.conts and not job.res.error:
            return
        job.base_logp = {}
        if job.spec.max_tokens and not job.res.error:
            # the prompt's last logits are gone: re-evaluate its last token (rare: multi-token options with generation)
            job.pos -= 1
            self.L.llama_memory_seq_rm(self.mem, job.slot, job.pos, -1)
            job.pending = [job.spec.tokens[-1]]
            job.state = "prompt"
            job.options = {}
        else:
            job.state = "done-pending"

    def _start_generation(self, job: _Job, logits: np.ndarray) -> None:
        job.decoder = codecs.getincrementaldecoder("utf-8")("ignore")
        if job.spec.repeat_penalty != 1.0:
            job.seen = np.zeros(self.n_vocab, dtype=bool)
            job.seen[np.asarray(job.spec.tokens, dtype=np.int64)] = True
        job.state = "gen"
        self._step(job, logits)

    def _step(self, job: _Job, logits: np.ndarray) -> None:
        """One greedy step from `logits`: pick, check the end conditions, or schedule the token."""
        if job.seen is not None:  # Hugging Face's repetition penalty over the whole context
            logits = logits.copy()
            pen = logits[job.seen]
            logits[job.seen] = np.where(pen > 0, pen / job.spec.repeat_penalty, pen * job.spec.repeat_penalty)
        tok = int(np.argmax(logits))
        if math.isnan(float(logits[tok])) or math.isnan(float(logits.max())):
            job.res.error, job.res.finish, job.state = "the model produced non-finite logits", "error", "done-pending"
            return
        if tok in job.spec.end_tokens:
            job.res.n_generated += 1
            self.n_generated += 1
            job.res.text += job.decoder.decode(self.piece(tok))
            job.res.finish, job.state = "closed", "done-pending"
            return
        if self.L.llama_vocab_is_eog(self.vocab, tok):
            job.res.finish, job.state = "stop", "done-pending"
            return
        job.generated.append(tok)
        job.res.n_generated += 1
        self.n_generated += 1
        if job.seen is not None:
            job.seen[tok] = True
        old = len(job.res.text)
        job.res.text += job.decoder.decode(self.piece(tok))
        cut = stop_at(job.res.text, job.spec.stop, job.spec.stop_after_text, since=old)
        if cut is not None:
            job.res.text, job.res.finish, job.state = cut, "stop", "done-pending"
            return
        if job.spec.stop_regex and re.search(job.spec.stop_regex, job.res.text):
            job.res.finish, job.state = "settled", "done-pending"
            return
        if len(job.generated) >= job.spec.max_tokens:
            job.res.finish, job.state = "length", "done-pending"
            return
        if job.pos + 1 >= self.n_ctx:
            job.res.finish, job.state = "context", "done-pending"
            return
        job.next_token = tok


def stop_at(text: str, stops: Sequence[str], after_text: bool = True, since: int = 0) -> str | None:
    """Cut at the first stop string (that occurs after the leading whitespace, if `after_text`);
    None if none occurs. `since`: the text before it was checked already."""
    if not stops:
        return None
    lead = len(text) - len(text.lstrip()) if after_text else 0
    hits = []
    for s in stops:
        i = text.find(s, max(lead, since - len(s) + 1, 0))
        if i >= 0:
            hits.append(i)
    return text[: min(hits)] if hits else None

