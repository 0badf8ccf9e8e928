"""Model backends, one module each, registered by kind (`@registry.backend("llamacpp")`).

A backend module imports its heavy library (llama_cpp, an HTTP client, onnxruntime) only when a
backend is made, so listing or validating models stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import registry
from ..config import ModelSpec
from ..types import Backend


@dataclass(frozen=True)
class LoadOptions:
    """Run-level settings a backend may use (each backend refuses what it cannot honour)."""

    n_ctx: int | None = None
    n_gpu_layers: int | None = None
    n_threads: int | None = None
    seed: int = 0
    parallel: int | None = None  # sequences decoded together (llama.cpp); None: the backend's default
    concurrency: int | None = None  # requests in flight (served models); None: the backend's default
    timeout: float | None = None  # seconds per request (served models)
    max_retries: int | None = None  # retries per request (served models)


def check_model(spec: ModelSpec, load: LoadOptions | None = None) -> None:
    """Validate a model spec with its backend's own rules, before anything is loaded."""
    registry.backend_class(spec.kind).validate(spec, load or LoadOptions())


def make_backend(spec: ModelSpec, load: LoadOptions | None = None) -> Backend:
    """The backend a model spec names (its `kind`), loaded."""
    return registry.backend_class(spec.kind)(spec, load or LoadOptions())
