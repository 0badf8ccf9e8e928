"""From a chunk's requests to the engine's jobs, and from the jobs' results back to one result per
request (the llama.cpp backend's plan; `llamacpp_batch.Engine` runs the jobs).

An OptionLogprobs request and a Generate request for the same prompt share one job when every
option is one token: the options are scored at the position where generation starts. A request
whose prompt does not fit the context gets no job: its result says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from ..types import Completion, Generate, OptionLogprobs, OptionScores
from .llamacpp_batch import JobResult, JobSpec


class Tokenized(NamedTuple):
    """A request with its prompt as evaluated: the text (chat template applied), its tokens, how
    many of them form the reusable prefix, and the rendered text when a template was applied."""

    req: Generate | OptionLogprobs
    full: str
    tokens: list[int]
    n_prefix: int
    rendered: str | None


@dataclass
class Plan:
    prepared: list[Tokenized]
    jobs: list[JobSpec] = field(default_factory=list)
    where: list[tuple[int | None, str]] = field(default_factory=list)  # request → (job, "gen" | "scores"); None: did not fit

    def done_callback(self, on_done: Callable[[int], None] | None):
        """The engine's per-job callback as per-request calls."""
        if not on_done:
            return None
        by_job: dict[int, list[int]] = {}
        for r, (j, _) in enumerate(self.where):
            if j is not None:
                by_job.setdefault(j, []).append(r)
        return lambda j: [on_done(r) for r in by_job[j]]

    def results(self, results: list[JobResult], on_done: Callable[[int], None] | None = None) -> list:
        out: list[Completion | OptionScores] = []
        for (req, _full, tokens, _n, rendered), (j, what) in zip(self.prepared, self.where):
            if j is None:
                out.append(OptionScores(fits=False, n_prompt_tokens=len(tokens), rendered=rendered) if what == "scores" else
                           Completion(text="", n_prompt_tokens=len(tokens), finish="context", rendered=rendered))
                if on_done:
                    on_done(len(out) - 1)
                continue
            res = results[j]
            if what == "scores":
                out.append(OptionScores(scores=dict(res.scores), top=res.top, n_prompt_tokens=len(tokens), rendered=rendered,
                                        error=res.error))
            else:
                out.append(Completion(text=res.text, n_prompt_tokens=len(tokens), n_tokens=res.n_generated,
                                      finish="error" if res.error else res.finish, rendered=rendered, error=res.error))
        return out


@dataclass(frozen=True)
class ReasoningStage(Generate):
    """A reasoning model's first stage: its reasoning, up to the reasoning budget, ended by the
    family's end marker (`end_tokens`, or `stop_regex` where the marker is several tokens)."""


def make_plan(prepared: list[Tokenized], n_ctx: int, continuation: Callable, end_tokens: tuple[int, ...] = ()) -> Plan:
    """The jobs for these requests. `continuation(full, tokens, option, chat)` gives the tokens
    the model would emit for an option after the prompt; `end_tokens`: what ends a ReasoningStage."""
    plan = Plan(prepared)
    jobs, where = plan.jobs, plan.where
    merged: dict[tuple, int] = {}
    for req, full, tokens, n_prefix, _rendered in prepared:
        if isinstance(req, OptionLogprobs):
            options = {o: sorted({continuation(full, tokens, v, req.chat) for v in (o, " " + o)}) for o in req.options}
            longest = max((len(c) for vs in options.values() for c in vs), default=1)
            if len(tokens) + longest > n_ctx:
                where.append((None, "scores"))
                continue
            key = (tuple(tokens), "gen")
            if key in merged and all(len(c) == 1 for vs in options.values() for c in vs) and not jobs[merged[key]].options:
                jobs[merged[key]].options = options
                where.append((merged[key], "scores"))
                continue
            merged[(tuple(tokens), "scores")] = len(jobs)
            where.append((len(jobs), "scores"))
            jobs.append(JobSpec(tokens=tokens, n_prefix=n_prefix, options=options))
        else:
            if len(tokens) + 1 > n_ctx:
                where.append((None, "gen"))
                continue
            key = (tuple(tokens), "scores")
            job = JobSpec(tokens=tokens, n_prefix=n_prefix, max_tokens=req.max_tokens, stop=req.stop,
                          stop_after_text=req.stop_after_text, stop_regex=req.stop_regex, repeat_penalty=req.repeat_penalty,
                          end_tokens=end_tokens if isinstance(req, ReasoningStage) else ())
            if key in merged and all(len(c) == 1 for vs in jobs[merged[key]].options.values() for c in vs) \
                    and not jobs[merged[key]].max_tokens:
                # the option scores asked before: this generation carries them
                j = merged.pop(key)
                job.options = jobs[j].options
                jobs[j] = job
                where.append((j, "gen"))
                continue
            merged[(tuple(tokens), "gen")] = len(jobs)
            where.append((len(jobs), "gen"))
            jobs.append(job)
    return plan
