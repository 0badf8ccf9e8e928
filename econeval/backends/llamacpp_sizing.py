"""How large the llama.cpp backend makes itself on this machine, from the model, the settings and
the memory the KV cache can have:

- `n_ctx`, the context one item may use (its prompt and its generation): the context given
  (`--n-ctx`, the models.toml entry's `n_ctx`), else the model's trained context (its GGUF
  metadata), bounded by the memory free for the KV cache;
- `n_cells`, the KV pool the scheduler plans within: twice the attention budget, so that the
  sequences that start within the budget can grow (a job alone may use up to `n_ctx`; the
  llama.cpp context holds the longest item of the run besides, `LlamaCppBackend.reserve`);
- `parallel`, `kv_budget`, `n_batch`, `n_ubatch`: how many sequences decode together, the KV cells
  in use past which no new sequence starts (attention in a unified cache runs over every cell in
  use, so the budget caps its cost), and the tokens per `llama_decode` call and per compute step;
- `layout`, `stream_cells`: the KV cache's layout, one pool (`unified`) or a stream per sequence
  (`streams`, llamacpp_streams.py), and a stream's cells: the longest prompt and budget a stream
  holds (a longer job runs in a unified context beside the streams, of at most `n_cells`).

Everything here is recorded in run.json (`backend.details.context` and the sizes beside it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .llamacpp_devices import gpus

DEFAULT_PARALLEL_CPU = 8  # tools/bench.py measures the default against --parallel 1
DEFAULT_PARALLEL_GPU = 64
# cells in use past which no new sequence starts: on a CPU attention over more costs more than
# batching gains (tools/bench_schedule.py measures it); on a GPU the same holds past a larger pool
KV_BUDGET_CPU = 2048
KV_BUDGET_GPU = 32768
N_BATCH, N_UBATCH = 2048, 512  # tokens per llama_decode call / per compute step
# the KV layout by device: streams on a GPU (attention over a sequence's own cells only; not yet measured
# on a GPU), on the CPU what tools/bench_layout.py measured faster there: unified, 1.06x the streams' speed
# on an idle 2-core machine with the default model (docs/speed-and-gpu.md, "KV layouts on the CPU")
LAYOUTS = ("unified", "streams")
DEFAULT_LAYOUT = {"cpu": "unified", "gpu": "streams"}
# a stream's cells: CFBenchmark few-shot's prompt and budget are 3,552 tokens at the 99th percentile in
# Gemma 3's vocabulary (9,509 the longest), about 1.7 times that in Mistral 7B's
STREAM_CELLS = {"cpu": 4096, "gpu": 8192}
MIN_STREAM = 256  # llama.cpp's smallest stream
FALLBACK_CTX = 4096  # a GGUF that does not say its trained context
MIN_CTX = 256
# the share of the memory free once the weights are loaded that the KV cache and the attention
# scores may take: on a CPU the rest of the machine keeps half
MEMORY_SHARE = {"cpu": 0.5, "gpu": 0.9}


@dataclass(frozen=True)
class Sizes:
    n_ctx: int
    n_cells: int
    parallel: int
    n_batch: int
    n_ubatch: int
    kv_budget: int
    context: dict  # how n_ctx was chosen, for run.json
    layout: str = "unified"
    stream_cells: int = 0  # streams: the cells of each sequence's stream (the llama.cpp context: parallel + 1 of them)


@dataclass(frozen=True)
class ModelShape:
    """What the sizes depend on in the model: its trained context and the bytes each KV cell
    (one token of one sequence, every layer) and each attention score row take."""

    trained: int
    kv_bytes: int  # per cell, keys and values at f16
    n_head: int

    @classmethod
    def of(cls, llama_cpp: Any, model: Any, gguf: dict[str, str]) -> "ModelShape":
        L = llama_cpp
        arch = gguf.get("general.architecture", "")
        n_layer, n_embd = L.llama_model_n_layer(model), L.llama_model_n_embd(model)
        n_head, n_head_kv = max(1, L.llama_model_n_head(model)), max(1, L.llama_model_n_head_kv(model))

        def dim(key: str) -> int:
            try:
                return int(gguf[f"{arch}.attention.{key}"])
            except (KeyError, ValueError):
                return n_embd // n_head

        return cls(trained=int(L.llama_model_n_ctx_train(model)),
                   kv_bytes=n_layer * n_head_kv * (dim("key_length") + dim("value_length")) * 2, n_head=n_head)


def free_memory(llama_cpp: Any, gpu: bool) -> int | None:
    """Bytes free where the KV cache lives: the GPUs' free memory (llama.cpp's device registry),
    or the memory available to programs on this machine; None where neither can be read."""
    if gpu:
        return sum(d.free for d in gpus(llama_cpp)) or None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def parallel_for(given: int | None, gpu: bool) -> int:
    """The sequences decoded together: the one given (--parallel), else the device's default."""
    return given or (DEFAULT_PARALLEL_GPU if gpu else DEFAULT_PARALLEL_CPU)


def _down(n: int, step: int = 256) -> int:
    return n // step * step


def _up(n: int, step: int = 256) -> int:
    return -(-n // step) * step


def size(shape: ModelShape, *, given_ctx: int | None, parallel: int | None, gpu: bool, flash_attn: bool,
         free: int | None, layout: str | None = None, n_ubatch: int | None = None) -> Sizes:
    """The sizes for this model on this device (see the module's docstring)."""
    parallel = parallel_for(parallel, gpu)
    device = "gpu" if gpu else "cpu"
    layout = layout or DEFAULT_LAYOUT[device]
    ubatch = n_ubatch or N_UBATCH
    budget = KV_BUDGET_GPU if gpu else KV_BUDGET_CPU
    if given_ctx:
        n_ctx, why = given_ctx, "given (--n-ctx or the model entry's n_ctx)"
    elif shape.trained > 0:
        n_ctx, why = shape.trained, "the model's trained context (GGUF metadata)"
    else:
        n_ctx, why = FALLBACK_CTX, f"the model does not say its trained context: {FALLBACK_CTX:,}"
    n_cells = 2 * budget
    # per cell: its keys and values, and (without flash attention) a row of attention scores per head
    # for each token of a compute step
    scores = 0 if flash_attn else ubatch * shape.n_head * 4
    per_cell = shape.kv_bytes + scores
    memory: dict[str, Any] = {"device": device, "free_bytes": free, "share": MEMORY_SHARE[device], "bytes_per_cell": per_cell}
    most = None
    if free is not None:
        most = _down(int(free * MEMORY_SHARE[device]) // max(per_cell, 1))
        memory["cells_at_most"] = most
        n_cells = max(min(n_cells, most), MIN_CTX)
        if most < n_ctx:
            n_ctx, why = max(most, MIN_CTX), f"{why}, bounded by the memory free for the KV cache ({free / 2**30:.1f} GiB free on the {device})"
    stream = 0
    if layout == "streams":
        # parallel + 1 streams (the keeper's too) of `stream` cells, whose attention scores are a stream's
        # rows only, and the unified context beside them for the jobs a stream cannot hold
        stream = max(MIN_STREAM, min(STREAM_CELLS[device], _up(n_ctx)))
        if free is not None:
            room = int(free * MEMORY_SHARE[device]) - (n_cells * per_cell if _up(n_ctx) > stream else 0)
            fits = _down(room // ((parallel + 1) * shape.kv_bytes + scores)) if room > 0 else 0
            if fits < stream:
                stream = max(MIN_STREAM, fits)
                memory["stream_cells_bounded"] = f"{stream:,}: the memory free for the KV cache"
    n_batch = min(N_BATCH, n_cells)
    context = {"n_ctx": n_ctx, "trained": shape.trained or None, "given": given_ctx, "why": why, "memory": memory}
    return Sizes(n_ctx=n_ctx, n_cells=n_cells, parallel=parallel, n_batch=n_batch, n_ubatch=min(ubatch, n_batch),
                 kv_budget=min(budget, n_cells), context=context, layout=layout, stream_cells=stream)
