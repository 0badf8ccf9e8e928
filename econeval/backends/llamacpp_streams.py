"""The schedule of per-sequence KV streams (llama.cpp's `kv_unified = false`): each sequence has
a stream of its own cells and attends over those only, where a unified cache makes every token
attend over every cell in use (on an H200 with a 7B model, 24 times the (token, cell) pairs the
suite needs: attention across sequences was 36% of the projected `--suite all`).

The same jobs, calls and results as the unified schedule (`llamacpp_batch.Call`), except:

- **A shared prefix is evaluated once, into one stream, and copied whole.** llama.cpp copies a
  stream only whole (`llama_memory_seq_cp(src, dst, -1, -1)`: the destination stream is reset,
  then gets the source's cells and, at the next `llama_decode`, its buffers), and a token may
  belong to one sequence only. So the group's first member evaluates the prefix into its own
  stream; in the call after the one that completes it, every member admitted so far gets a copy
  (the first member's own tokens wait for that call too, so that every copy holds the prefix
  alone), and so does the keeper stream while jobs of the group are still queued; a member
  admitted later copies the keeper's.
- **Cells as jobs need them.** A stream holds its job's whole prompt and budget (the backend
  gives a job that does not fit a stream to a unified context beside it), so a job starts as
  soon as a sequence is free: no attention budget, nothing set back.
- **The sequences in a call stay contiguous.** llama.cpp splits a call into compute steps of
  consecutive sequence ids with as many tokens each (`split_equal`): a gap between the sequences
  of a call costs a step more. Admission takes the lowest free sequence; once the queue is empty,
  the job in the highest sequence moves (one stream copy) into the lowest free one.
"""

from __future__ import annotations

from typing import Sequence

from .llamacpp_batch import Call, Entry, Group, Job


class StreamCall(Call):
    """The scheduler state of one Engine.run call over per-sequence KV streams."""

    @staticmethod
    def pairs(entries: Sequence[Entry], in_use: int) -> int:
        """(token, KV cell) pairs a call's attention computes: each token over its own stream's
        cells, those at its position and before."""
        return sum(pos + 1 for _, pos, _, _ in entries)

    def admit(self) -> None:
        """Admit jobs in order while a sequence is free (each stream holds its job's whole need)."""
        e = self.e
        while self.queue and self.free:
            job = self.queue.pop(0)
            g = job.group
            if g is not None and g.done == len(g.key) and g.members and not g.kept:
                # no pristine copy of the prefix is left (cannot happen: the keeper holds it while jobs
                # of the group are queued): the job evaluates its whole prompt itself
                job.group = g = None
            job.slot = self.free.pop(0)
            job.state = "prompt"
            job.pos = job.n_shared
            job.pending = list(job.spec.tokens[job.n_shared:])
            if g is not None:
                if g.kept and g.done == len(g.key):
                    e._copy(e.keeper, job.slot)
                    job.has_prefix = True
                elif not g.members and not g.kept:  # the group goes live: its prefix is evaluated into this stream
                    g.done, g.holder = 0, job
                    self.live.append(g)
                g.members.append(job)
            self.active.append(job)

    def prefix_done(self, group: Group) -> None:
        """The holder's stream holds the whole prefix and nothing else: copied into every member
        admitted meanwhile, and into the keeper while jobs of the group are queued."""
        holder = group.holder
        assert holder is not None
        holder.has_prefix = True
        for m in group.members:
            if not m.has_prefix:
                self.e._copy(holder.slot, m.slot)
                m.has_prefix = True
        if any(q.group is group for q in self.queue):
            self._keep(None)
            self.e._copy(holder.slot, self.e.keeper)
            group.kept, self.kept = True, group

    def _leave(self, job: Job) -> None:
        g = job.group
        if g is not None:
            g.members.remove(job)
            if g.holder is job:
                g.holder = None
            if not g.members and not g.kept:
                self.live.remove(g)
            elif g.kept and not g.members and not any(q.group is g for q in self.queue):
                self._keep(None)
        self._release(job)

    def make_room(self) -> None:
        """Nothing to set back (a job's stream holds its whole need). Once nothing is queued, the
        sequences still running move down into the free ones below them, so that a call's
        sequences stay contiguous."""
        if self.queue:
            return  # a finished job's sequence is taken by the next job at once
        e = self.e
        while self.free and self.active:
            top = max(self.active, key=lambda j: j.slot)
            low = self.free[0]
            if low > top.slot:
                return
            if self._holds_cells(top):
                e._copy(top.slot, low)
                e._trim(top.slot, 0)
            self.free[0] = top.slot
            self.free.sort()
            top.slot = low

    @staticmethod
    def _holds_cells(job: Job) -> bool:
        """Whether its stream holds anything yet (a member waiting for its prefix's copy does not)."""
        g = job.group
        return g is None or job.has_prefix or g.holder is job

    @staticmethod
    def _prefix_seqs(g: Group) -> tuple[int, ...]:
        """A prefix is evaluated into its holder's stream alone (then copied whole into the others)."""
        assert g.holder is not None
        return (g.holder.slot,)

    @staticmethod
    def _waits(job: Job, ready: set[int]) -> bool:
        """A member sits out until its prefix was copied into its stream."""
        return job.group is not None and not job.has_prefix
