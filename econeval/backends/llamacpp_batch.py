"""A deterministic multi-sequence scheduler over llama.cpp's batched decode (`llama_decode` with
one sequence id per request in a unified KV cache).

One call of `Engine.run(jobs)` evaluates a list of jobs (prompt scoring and greedy generation):

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
from typing import Callable, Sequence

import numpy as np


@dataclass
class Job:
    tokens: list[int]  # the whole prompt (BOS included)
    n_prefix: int = 0  # leading tokens shared with other jobs through the prefix sequence
    max_tokens: int = 0  # 0: score only
    stop: tuple[str, ...] = ()
    stop_after_text: bool = True
    stop_regex: str | None = None
    repeat_penalty: float = 1.0
    # option scoring at the end of the prompt: option → token continuations (variants; the best counts)
    options: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    # results
    text: str = ""
    n_generated: int = 0
    finish: str = "stop"
    scores: dict[str, float] = field(default_factory=dict)
    top: float | None = None
    error: str | None = None
    # state
    index: int = -1
    slot: int = -1
    pos: int = 0
    pending: list[int] = field(default_factory=list)
    state: str = "queued"  # queued | prompt | cont | gen | done
    generated: list[int] = field(default_factory=list)
    conts: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    base_logp: dict | None = None
    reserve: int = 0
    seen: np.ndarray | None = None
    decoder: object = None
    next_token: int = -1


def logsumexp(logits: np.ndarray) -> float:
    """log Σ exp(logits), in one pass (exp in float32, summed in float64); a token's
    log-probability is then logits[token] - logsumexp (no float64 copy of the vocabulary)."""
    m = float(logits.max())
    if not math.isfinite(m):
        return math.nan
    return m + math.log(float(np.exp(logits - np.float32(m)).sum(dtype=np.float64)))


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
        rc = self.L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        self.n_evaluated += len(entries)
        self.n_decode_calls += 1

    def _logits(self, i: int) -> np.ndarray:
        ptr = self.L.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    # ---- one call ----------------------------------------------------------------------------
    def run(self, jobs: Sequence[Job], on_done: Callable[[int], None] | None = None) -> None:
        L = self.L
        L.llama_memory_clear(self.mem, True)
        counts: dict[tuple, int] = {}
        for j in jobs:
            if j.n_prefix:
                counts[tuple(j.tokens[: j.n_prefix])] = counts.get(tuple(j.tokens[: j.n_prefix]), 0) + 1
        for n, j in enumerate(jobs):  # a prefix of one job is no shared prefix
            j.index = n
            if j.n_prefix and counts[tuple(j.tokens[: j.n_prefix])] < 2:
                j.n_prefix = 0
            cont_len = max((len(c) for vs in j.options.values() for c in vs), default=1)
            j.reserve = min(len(j.tokens) - j.n_prefix + max(j.max_tokens, cont_len - 1), self.n_ctx)
        queue = deque(range(len(jobs)))
        free = list(range(self.n_seq))
        active: list[Job] = []
        current: dict | None = None  # the prefix in the prefix sequence: {"key", "refs"}
        owner: dict[int, dict] = {}  # job index → the prefix evaluation its sequence shares
        used = 0  # KV cells reserved: active jobs' own cells, and each live prefix evaluation's

        def live_prefix_cells() -> int:
            live = {id(i): len(i["key"]) for i in owner.values()}
            if current is not None:
                live[id(current)] = len(current["key"])
            return sum(live.values())

        def release(job: Job) -> None:
            nonlocal used
            L.llama_memory_seq_rm(self.mem, job.slot, -1, -1)
            used -= job.reserve
            inst = owner.pop(job.index, None)
            if inst is not None:
                inst["refs"] -= 1
                if inst["refs"] == 0 and inst is not current:
                    used -= len(inst["key"])
            free.append(job.slot)
            free.sort()
            job.state = "done"
            active.remove(job)
            if on_done:
                on_done(job.index)

        while queue or active:
            # admit jobs in order while a sequence and their KV cells are free
            while queue and free:
                job = jobs[queue[0]]
                key = tuple(job.tokens[: job.n_prefix]) if job.n_prefix else None
                fresh = key is not None and (current is None or current["key"] != key)
                if fresh and active and any(a.n_prefix for a in active):
                    break  # one shared prefix at a time: its jobs finish before another prefix comes in
                need = job.reserve + (len(key) if fresh else 0)
                # hard: the reservations (prompt + every token a job may generate) fit the context;
                # soft: the cells in use now plus this prompt stay within the attention budget
                in_use = sum(len(a.tokens) - a.n_prefix + a.n_generated for a in active) + live_prefix_cells()
                soft = in_use + len(job.tokens) - job.n_prefix + (len(key) if fresh else 0)
                if used + need > self.n_ctx or soft > self.kv_budget:
                    if active:
                        break
                    if current is not None and fresh:  # alone: make room
                        L.llama_memory_seq_rm(self.mem, self.prefix_seq, -1, -1)
                        used -= len(current["key"])
                        current = None
                queue.popleft()
                job.slot = free.pop(0)
                if key:
                    if fresh:
                        if current is not None:
                            L.llama_memory_seq_rm(self.mem, self.prefix_seq, -1, -1)
                            if current["refs"] == 0:
                                used -= len(current["key"])
                        for s in range(0, len(key), self.n_batch):  # the prefix alone, in its own calls
                            self._decode([(t, s + k, self.prefix_seq, False) for k, t in enumerate(key[s:s + self.n_batch])])
                        current = {"key": key, "refs": 0}
                        used += len(key)
                    L.llama_memory_seq_cp(self.mem, self.prefix_seq, job.slot, -1, -1)
                    current["refs"] += 1
                    owner[job.index] = current
                used += job.reserve
                job.pos = job.n_prefix
                job.pending = list(job.tokens[job.n_prefix:])
                job.state = "prompt"
                active.append(job)
            # one decode call over the active jobs
            entries: list[tuple[int, int, int, bool]] = []
            outputs: list[tuple[Job, int, int]] = []  # (job, first output index, how many)
            cap = self.n_batch
            for job in active:
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
                    release(job)

    # ---- per job -----------------------------------------------------------------------------
    def _prompt_done(self, job: Job, i: int) -> None:
        logits = self._logits(i)
        if job.options:
            lse = logsumexp(logits)
            job.top = float(logits.max()) - lse
            if not math.isfinite(job.top):
                job.error = "the model produced non-finite logits"
                job.state = "done-pending"
                return
            for opt, variants in job.options.items():
                job.scores[opt] = max(float(logits[c[0]]) - lse for c in variants if len(c) == 1) \
                    if any(len(c) == 1 for c in variants) else -math.inf
                job.conts += [(opt, c) for c in variants if len(c) > 1]
            if job.conts:
                job.base_logp = {c[0]: float(logits[c[0]]) - lse for _, c in job.conts}
                job.state = "cont"
                return
        if job.max_tokens:
            self._start_generation(job, logits)
        else:
            job.state = "done-pending"

    def _cont_done(self, job: Job, first: int, n: int) -> None:
        opt, cont = job.conts.pop(0)
        total = job.base_logp[cont[0]]
        for k in range(n):
            logits = self._logits(first + k)
            total += float(logits[cont[k + 1]]) - logsumexp(logits)
        if math.isnan(total):
            job.error = "the model produced non-finite logits"
        job.scores[opt] = max(job.scores.get(opt, -math.inf), total)
        self.L.llama_memory_seq_rm(self.mem, job.slot, job.pos, -1)  # back to the end of the prompt
        if job.conts and not job.error:
            return
        job.base_logp = None
        if job.max_tokens and not job.error:
            # the prompt's last logits are gone: re-evaluate its last token (rare: multi-token options with generation)
            job.pos -= 1
            self.L.llama_memory_seq_rm(self.mem, job.slot, job.pos, -1)
            job.pending = [job.tokens[-1]]
            job.state = "prompt"
            job.options = {}
        else:
            job.state = "done-pending"

    def _start_generation(self, job: Job, logits: np.ndarray) -> None:
        job.decoder = codecs.getincrementaldecoder("utf-8")("ignore")
        if job.repeat_penalty != 1.0:
            job.seen = np.zeros(self.n_vocab, dtype=bool)
            job.seen[np.asarray(job.tokens, dtype=np.int64)] = True
        job.state = "gen"
        self._step(job, logits)

    def _step(self, job: Job, logits: np.ndarray) -> None:
        """One greedy step from `logits`: pick, check the end conditions, or schedule the token."""
        if job.seen is not None:  # Hugging Face's repetition penalty over the whole context
            logits = logits.copy()
            pen = logits[job.seen]
            logits[job.seen] = np.where(pen > 0, pen / job.repeat_penalty, pen * job.repeat_penalty)
        tok = int(np.argmax(logits))
        if math.isnan(float(logits[tok])) or math.isnan(float(logits.max())):
            job.error, job.finish, job.state = "the model produced non-finite logits", "error", "done-pending"
            return
        if self.L.llama_vocab_is_eog(self.vocab, tok):
            job.finish, job.state = "stop", "done-pending"
            return
        job.generated.append(tok)
        job.n_generated += 1
        self.n_generated += 1
        if job.seen is not None:
            job.seen[tok] = True
        old = len(job.text)
        job.text += job.decoder.decode(self.piece(tok))
        cut = stop_at(job.text, job.stop, job.stop_after_text, since=old)
        if cut is not None:
            job.text, job.finish, job.state = cut, "stop", "done-pending"
            return
        if job.stop_regex and re.search(job.stop_regex, job.text):
            job.finish, job.state = "settled", "done-pending"
            return
        if len(job.generated) >= job.max_tokens:
            job.finish, job.state = "length", "done-pending"
            return
        if job.pos + 1 >= self.n_ctx:
            job.finish, job.state = "context", "done-pending"
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

