"""Model backends. Each heavy library is imported only inside its own module."""

from __future__ import annotations

from ..config import ModelSpec


def make_backend(spec: ModelSpec, n_ctx: int | None = None, n_gpu_layers: int | None = None, seed: int = 0,
                 n_threads: int | None = None):
    """The backend a model spec names: an OpenAI-compatible HTTP API or in-process llama.cpp."""
    if spec.base_url:
        from .openai_http import OpenAIHTTPBackend

        return OpenAIHTTPBackend(spec, seed=seed)
    from .llamacpp import LlamaCppBackend

    return LlamaCppBackend(spec, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, seed=seed, n_threads=n_threads)
