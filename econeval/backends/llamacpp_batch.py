"""A deterministic multi-sequence scheduler over llama.cpp's batched decode (`llama_decode` with
one sequence id per request). This module's schedule is the unified KV cache's (one pool of cells
that every sequence attends over); `llamacpp_streams.StreamCall` is the schedule of per-sequence
KV streams, the same jobs, calls and results otherwise.

One call of `Engine.run(specs)` evaluates a list of jobs (prompt scoring and greedy generation):

- The KV cache is cleared first, so what a call computes depends on its job list alone (llama.cpp's
  logits depend on batch composition; this makes them a pure function of the list).
- Jobs run grouped by their shared prefix (a prefix shared by at least two jobs of the call): the
  groups in the order of their first job, the jobs of a group in list order. Several groups are
  live at once. A group's prefix is evaluated once, as tokens that belong to every member
  sequence admitted with it (one KV cell each, shared); a member admitted later shares the cells
  already evaluated (`llama_memory_seq_cp`, no recomputation). A job's own tokens follow its
  prefix in the same `llama_decode` call where they fit.
- Up to `n_seq` jobs are active. Each `llama_decode` call carries the prefixes being evaluated,
  then, for the active jobs in admission order, their remaining prompt tokens (logits only at a
  prompt's last token), the next token of each generating job, or an option continuation; at most
  `n_batch` tokens. A job that finishes frees its sequence and the next job takes it (continuous
  batching).
- KV cells are taken as jobs need them: a job is admitted while its own prompt and generation
  budget fit beside the cells in use now, and while the cells in use stay within `kv_budget`
  (attention runs over every cell in use: long prompts run fewer at a time). Should the cells of
  the growing generations run out, the job admitted last is set back (its cells freed, its
  result discarded) and runs again from its start once a job has finished; no job is ever cut
  short by another.
- Log-softmax in float64 only where log-probabilities are read; greedy argmax on llama.cpp's
  float32 logits; text decoded incrementally (no re-detokenising of the whole output).
"""

from __future__ import annotations

import codecs
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..signals import model_step, raise_if_stopped, stop_requested


@dataclass
class JobSpec:
    """What to evaluate: a prompt, and option scoring at its end and/or greedy generation."""

    tokens: list[int]  # the whole prompt (BOS included)
    n_prefix: int = 0  # leading tokens that other jobs of the call may share (a few-shot block, an instruction)
    max_tokens: int = 0  # 0: score only
    stop: tuple[str, ...] = ()
    stop_after_text: bool = True
    stop_regex: str | None = None
    repeat_penalty: float = 1.0
    end_tokens: tuple[int, ...] = ()  # tokens that end the generation as "closed" (a reasoning's end marker), kept in the text
    # option scoring at the end of the prompt: option → token continuations (variants; the best counts)
    options: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)


def cells_of(spec: JobSpec) -> int:
    """The KV cells a job may hold at most: its whole prompt and its budget (or its longest option
    continuation)."""
    cont = max((len(c) for vs in spec.options.values() for c in vs), default=1) - 1
    return len(spec.tokens) + max(spec.max_tokens, cont)


@dataclass
class JobResult:
    text: str = ""
    n_generated: int = 0
    finish: str = "stop"
    scores: dict[str, float] = field(default_factory=dict)
    top: float | None = None
    error: str | None = None


@dataclass
class Group:
    """A prefix shared by jobs of one call: its tokens, the active jobs whose sequences hold its
    cells, how many of its tokens are evaluated (into every member's sequence at once), and
    whether the keeper sequence holds them while no member does."""

    key: tuple[int, ...]
    members: list["Job"] = field(default_factory=list)
    done: int = 0
    kept: bool = False
    holder: "Job | None" = None  # per-sequence streams: the member whose stream the prefix is evaluated into


@dataclass
class Job:
    """The engine's state of one job while it runs (private to Engine.run)."""

    spec: JobSpec
    index: int
    order: tuple[int, int]  # its place in the admission order: (its group's first job, its own index)
    group: Group | None  # its shared prefix (None when no other job of the call has it)
    res: JobResult = field(default_factory=JobResult)
    options: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)  # what is left to score
    slot: int = -1
    pos: int = 0
    pending: list[int] = field(default_factory=list)
    state: str = "queued"  # queued | prompt | cont | gen | done-pending | done
    generated: list[int] = field(default_factory=list)
    conts: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    base_logp: dict = field(default_factory=dict)
    seen: np.ndarray | None = None
    decoder: Any = None
    next_token: int = -1
    has_prefix: bool = False  # per-sequence streams: its stream holds its group's evaluated prefix

    def cells(self) -> int:
        return cells_of(self.spec)

    def __post_init__(self) -> None:
        self.options = dict(self.spec.options)

    @property
    def n_shared(self) -> int:
        return len(self.group.key) if self.group is not None else 0

    @property
    def own_cells(self) -> int:
        """The KV cells of this job's own sequence beyond its shared prefix, as far as it has got."""
        return len(self.spec.tokens) - self.n_shared + len(self.generated)

    def need(self) -> int:
        """Cells it may still take: the rest of its prompt and of its generation budget (or its
        longest option continuation)."""
        return self.cells() - self.n_shared

    def waiting(self) -> bool:
        """Its prefix is not evaluated yet: its own tokens wait."""
        return self.group is not None and self.group.done < len(self.group.key)


def logsumexp(logits: np.ndarray) -> float:
    """log Σ exp(logits), in one pass (exp in float32, summed in float64); a token's
    log-probability is then logits[token] - logsumexp (no float64 copy of the vocabulary)."""
    m = float(logits.max())
    if not math.isfinite(m):
        return math.nan
    return m + math.log(float(np.exp(logits - np.float32(m)).sum(dtype=np.float64)))


Entry = tuple[int, int, tuple[int, ...], bool]  # token, position, its sequences, wants logits


class Call:
    """The scheduler state of one Engine.run call: the queue (in admission order), the free
    sequences, the active jobs, the live prefix groups and the KV cells in use."""

    def __init__(self, engine: "Engine", jobs: list[Job], on_done: Callable[[int], None] | None):
        self.e, self.jobs, self.on_done = engine, jobs, on_done
        self.queue: list[Job] = sorted(jobs, key=lambda j: j.order)
        self.free = list(range(engine.n_seq))
        self.active: list[Job] = []
        self.live: list[Group] = []  # groups with members or kept, in the order they went live
        self.kept: Group | None = None  # the group whose prefix the keeper sequence holds
        self.hold = False  # a job was set back: nothing new starts until a job finishes

    def in_use(self) -> int:
        """KV cells held now (a live prefix once, each active job's own cells; a prompt not yet
        evaluated counts whole)."""
        return sum(len(g.key) for g in self.live) + sum(j.own_cells for j in self.active)

    @staticmethod
    def pairs(entries: Sequence[Entry], in_use: int) -> int:
        """(token, KV cell) pairs a call's attention computes: in a unified cache every token of the
        call attends over every cell in use (the projection's cost model)."""
        return len(entries) * in_use

    def prefix_done(self, group: Group) -> None:
        """A group's prefix was evaluated whole by the last call (its members' sequences hold it already)."""

    # ---- admission and release ---------------------------------------------------------------
    def admit(self) -> None:
        """Admit jobs in order while a sequence is free, their cells fit the pool beside those in
        use, and the cells in use stay within the attention budget."""
        e = self.e
        while self.queue and self.free and not self.hold:
            job = self.queue[0]
            g = job.group
            new_prefix = len(g.key) if g is not None and not g.members and not g.kept else 0
            used = self.in_use()
            if self.active and (used + new_prefix + job.need() > e.n_cells
                                or used + new_prefix + len(job.spec.tokens) - job.n_shared > e.kv_budget):
                break
            self.queue.pop(0)
            job.slot = self.free.pop(0)
            job.state = "prompt"
            job.pos = job.n_shared
            job.pending = list(job.spec.tokens[job.n_shared:])
            if g is not None:
                if g.members and g.done:  # share the prefix cells evaluated so far
                    e._share(g.members[0].slot, job.slot, g.done)
                elif g.kept:
                    e._share(e.keeper, job.slot, g.done)
                elif not g.members:
                    g.done = 0
                    self.live.append(g)
                g.members.append(job)
            self.active.append(job)

    def _leave(self, job: Job) -> None:
        """Free a job's sequence. The last member of a group whose jobs are still queued hands its
        prefix to the keeper sequence (one group at a time), so that the next need not evaluate it
        again (a group whose jobs run one at a time, the attention budget allowing no more)."""
        e = self.e
        g = job.group
        if g is not None:
            g.members.remove(job)
            if not g.members and not g.kept:
                if g.done == len(g.key) and any(q.group is g for q in self.queue):
                    self._keep(None)
                    e._share(job.slot, e.keeper, g.done)
                    g.kept, self.kept = True, g
                else:
                    self.live.remove(g)
            elif g.kept and not g.members and not any(q.group is g for q in self.queue):
                self._keep(None)
        self._release(job)

    def _release(self, job: Job) -> None:
        """The job's sequence emptied and given back to the free ones (kept in order)."""
        self.e._trim(job.slot, 0)
        self.free.append(job.slot)
        self.free.sort()
        self.active.remove(job)
        job.slot = -1

    def _keep(self, g: Group | None) -> None:
        """Empty the keeper (its group leaves the live ones unless members hold it)."""
        old = self.kept
        if old is not None:
            self.e._trim(self.e.keeper, 0)
            old.kept = False
            if not old.members:
                self.live.remove(old)
        self.kept = g

    def release(self, job: Job) -> None:
        self._leave(job)
        job.state = "done"
        self.hold = False
        if self.on_done:
            self.on_done(job.index)

    def set_back(self, job: Job) -> None:
        """Free a job's cells and queue it again from its start (its partial result is dropped)."""
        fresh = Job(job.spec, job.index, job.order, job.group)
        self.jobs[job.index] = fresh
        self.queue.append(fresh)
        self.queue.sort(key=lambda j: j.order)
        self._leave(job)
        self.hold = True
        self.e.n_set_back += 1

    def make_room(self) -> None:
        """Before a step: if the tokens the generating jobs add would overrun the pool, set back
        the jobs admitted last until they fit (a job alone always fits: its prompt and budget fit
        the context)."""
        grow = sum(1 if j.state == "gen" else len(j.conts[0][1]) - 1 if j.state == "cont" else 0 for j in self.active)
        while len(self.active) > 1 and self.in_use() + grow > self.e.n_cells:
            last = self.active[-1]
            grow -= 1 if last.state == "gen" else len(last.conts[0][1]) - 1 if last.state == "cont" else 0
            self.set_back(last)

    # ---- one decode call ---------------------------------------------------------------------
    def batch(self) -> tuple[list[Entry], list[tuple[Job, int, int]], list[tuple[Group, int]]]:
        """One decode call: the live prefixes still being evaluated (each token once, in every
        member's sequence), then the active jobs in admission order; the entries, (job, first
        output index, how many) to read back, and (group, tokens evaluated after the call)."""
        entries: list[Entry] = []
        outputs: list[tuple[Job, int, int]] = []
        progress: list[tuple[Group, int]] = []
        cap = self.e.n_batch
        for g in self.live:
            if g.done < len(g.key) and cap > 0:
                part = g.key[g.done: g.done + cap]
                seqs = self._prefix_seqs(g)
                entries += [(t, g.done + k, seqs, False) for k, t in enumerate(part)]
                progress.append((g, g.done + len(part)))
                cap -= len(part)
        ready = {id(g) for g, done in progress if done == len(g.key)}
        for job in self.active:
            if cap <= 0:
                break
            if self._waits(job, ready):
                continue
            cap = self.add(job, entries, outputs, cap)
            if cap < 0:
                break
        return entries, outputs, progress

    @staticmethod
    def _prefix_seqs(g: Group) -> tuple[int, ...]:
        """The sequences a prefix's tokens go into: every member's (a unified cache shares them)."""
        return tuple(m.slot for m in g.members)

    @staticmethod
    def _waits(job: Job, ready: set[int]) -> bool:
        """Whether a job sits this call out: it waits for its group's prefix, not complete by its end
        (`ready`: the ids of the groups whose prefix this call completes)."""
        return job.waiting() and id(job.group) not in ready

    @staticmethod
    def add(job: Job, entries: list[Entry], outputs: list[tuple[Job, int, int]], cap: int) -> int:
        """A job's part of a call, at most `cap` tokens: the rest of its prompt (logits at its last
        token), its next generated token, or an option continuation; the tokens left, below 0 when
        a continuation does not fit (the call ends there)."""
        if job.state == "prompt":
            take = job.pending[:cap]
            done = len(take) == len(job.pending)
            for k, t in enumerate(take):
                entries.append((t, job.pos + k, (job.slot,), done and k == len(take) - 1))
            if done:
                outputs.append((job, len(entries) - 1, 1))
            job.pos += len(take)
            job.pending = job.pending[len(take):]
            return cap - len(take)
        if job.state == "gen":
            entries.append((job.next_token, job.pos, (job.slot,), True))
            outputs.append((job, len(entries) - 1, 1))
            job.pos += 1
            return cap - 1
        if job.state == "cont":
            _, cont = job.conts[0]
            body = cont[:-1]
            if len(body) > cap and entries:
                return -1
            first = len(entries)
            for k, t in enumerate(body):
                entries.append((t, job.pos + k, (job.slot,), True))
            outputs.append((job, first, len(body)))
            return cap - len(body)
        return cap


@dataclass(frozen=True)
class Shape:
    """What the scheduler plans with: an Engine's, or one not made yet (the projection's dry runs)."""

    n_ctx: int  # the most cells one sequence may use (prompt and generation)
    n_seq: int  # sequences decoded together
    n_batch: int  # tokens per llama_decode call
    n_cells: int  # the KV pool the sequences share, as the scheduler plans it
    kv_budget: int  # the cells in use past which no new sequence starts
    seq_cells: int  # the cells one sequence's KV can hold: the pool (unified), its stream (streams)
    call: type[Call] = Call  # the schedule of the KV layout

    @property
    def keeper(self) -> int:
        """The sequence that keeps a prefix between its group's jobs (n_seq_max: n_seq + 1)."""
        return self.n_seq


class Engine:
    def __init__(self, llama_cpp, ctx, vocab, n_vocab: int, n_ctx: int, n_seq: int, n_batch: int,
                 piece: Callable[[int], bytes], kv_budget: int | None = None, n_cells: int | None = None,
                 call: type[Call] = Call, seq_cells: int | None = None):
        """`n_ctx`: the most cells one sequence may use (prompt and generation); `n_cells`: the KV
        pool the sequences share as the scheduler plans it (default n_ctx; a job alone may use up
        to n_ctx: llama.cpp's context must hold the larger); `kv_budget`: the cells in use past
        which no new sequence starts. `call`: the schedule of the context's KV layout (`Call`, a
        unified cache; `llamacpp_streams.StreamCall`, one stream of `seq_cells` per sequence)."""
        self.L = llama_cpp
        self.ctx, self.vocab, self.n_vocab, self.n_ctx = ctx, vocab, n_vocab, n_ctx
        self.n_cells = n_cells or n_ctx
        self.n_seq, self.n_batch = n_seq, n_batch
        self.call = call
        self.seq_cells = seq_cells or self.n_cells
        self.mem = llama_cpp.llama_get_memory(ctx)
        self.keeper = n_seq  # the sequence that keeps a prefix between its group's jobs (n_seq_max: n_seq + 1)
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq)
        self.piece = piece
        self.n_evaluated = 0  # tokens sent through llama_decode
        self.n_generated = 0
        self.n_decode_calls = 0
        self.n_set_back = 0  # jobs set back when the pool ran out
        self.n_copies = 0  # whole KV streams copied (per-sequence streams: a prefix into a sequence, a sequence moved)
        self.current: Call | None = None  # the call in progress (or the last one)
        # KV cells the active jobs may use together when a new one is admitted. Attention runs over
        # every cell in use, so a larger pool makes each token dearer: long prompts run fewer at a time.
        self.kv_budget = min(self.n_cells, kv_budget or self.n_cells)
        # a stop (SIGINT / SIGTERM / SIGHUP) ends a decode between graph nodes, not at its end: llama.cpp
        # asks this between nodes (on the CPU; a GPU graph runs whole) and llama_decode returns 2
        self._abort = llama_cpp.ggml_abort_callback(lambda _data: stop_requested() is not None)
        llama_cpp.llama_set_abort_callback(ctx, self._abort, None)

    @property
    def shape(self) -> Shape:
        return Shape(self.n_ctx, self.n_seq, self.n_batch, self.n_cells, self.kv_budget, self.seq_cells, self.call)

    def close(self) -> None:
        if self.batch is not None:
            self.L.llama_batch_free(self.batch)
            self.batch = None

    # ---- low level ---------------------------------------------------------------------------
    def _clear(self) -> None:
        self.L.llama_memory_clear(self.mem, True)

    def _share(self, src: int, dst: int, upto: int) -> None:
        """Sequence `dst` shares the cells of `src` at positions below `upto` (no recomputation)."""
        self.L.llama_memory_seq_cp(self.mem, src, dst, 0, upto)

    def _copy(self, src: int, dst: int) -> None:
        """Per-sequence streams: stream `dst` becomes a copy of stream `src` (llama.cpp copies a
        stream whole, at the next llama_decode: its cells of sequence `src` as sequence `dst`)."""
        self.L.llama_memory_seq_cp(self.mem, src, dst, -1, -1)
        self.n_copies += 1

    def _trim(self, slot: int, start: int) -> None:
        """Drop sequence `slot`'s cells from position `start` on (0: all of them)."""
        self.L.llama_memory_seq_rm(self.mem, slot, start if start else -1, -1)

    def _decode(self, entries: list[Entry]) -> None:
        b = self.batch
        for i, (tok, pos, seqs, out) in enumerate(entries):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = len(seqs)
            for k, s in enumerate(seqs):
                b.seq_id[i][k] = s
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
        self._clear()
        groups: dict[tuple, Group] = {}
        first: dict[tuple, int] = {}
        for n, sp in enumerate(specs):
            if sp.n_prefix:
                key = tuple(sp.tokens[: sp.n_prefix])
                if key in first:
                    groups.setdefault(key, Group(key))
                else:
                    first[key] = n
        jobs = []
        for n, sp in enumerate(specs):
            key = tuple(sp.tokens[: sp.n_prefix]) if sp.n_prefix else ()
            g = groups.get(key)  # a prefix of one job is no shared prefix
            jobs.append(Job(sp, n, (first[key] if g is not None else n, n), g))
        call = self.current = self.call(self, jobs, on_done)
        while call.queue or call.active:
            call.admit()
            call.make_room()
            entries, outputs, progress = call.batch()
            if not entries:
                raise RuntimeError("the scheduler made no progress")  # cannot happen: a job alone always fits
            self._decode(entries)
            for g, done in progress:
                g.done = done
                if done == len(g.key):
                    call.prefix_done(g)
            for job, first_out, n in outputs:
                if job.state == "prompt":
                    self._prompt_done(job, first_out)
                elif job.state == "gen":
                    self._step(job, self._logits(first_out))
                else:
                    self._cont_done(job, first_out, n)
                if job.state == "done-pending":
                    call.release(job)
        return [j.res for j in call.jobs]

    # ---- per job -----------------------------------------------------------------------------
    def _prompt_done(self, job: Job, i: int) -> None:
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

    def _cont_done(self, job: Job, first: int, n: int) -> None:
        opt, cont = job.conts.pop(0)
        total = job.base_logp[cont[0]]
        for k in range(n):
            logits = self._logits(first + k)
            total += float(logits[cont[k + 1]]) - logsumexp(logits)
        if math.isnan(total):
            job.res.error = "the model produced non-finite logits"
        job.res.scores[opt] = max(job.res.scores.get(opt, -math.inf), total)
        self._trim(job.slot, job.pos)  # back to the end of the prompt
        if job.conts and not job.res.error:
            return
        job.base_logp = {}
        if job.spec.max_tokens and not job.res.error:
            # the prompt's last logits are gone: re-evaluate its last token (rare: multi-token options with generation)
            job.pos -= 1
            self._trim(job.slot, job.pos)
            job.pending = [job.spec.tokens[-1]]
            job.state = "prompt"
            job.options = {}
        else:
            job.state = "done-pending"

    def _start_generation(self, job: Job, logits: np.ndarray) -> None:
        job.decoder = codecs.getincrementaldecoder("utf-8")("ignore")
        if job.spec.repeat_penalty != 1.0:
            job.seen = np.zeros(self.n_vocab, dtype=bool)
            job.seen[np.asarray(job.spec.tokens, dtype=np.int64)] = True
        job.state = "gen"
        self._step(job, logits)

    def _step(self, job: Job, logits: np.ndarray) -> None:
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

