"""Backends, one module each, registered by kind (`@registry.backend("llamacpp")`) on the base
class in `base.py`; `roles.py` resolves and builds them.

A backend module imports its heavy library (llama_cpp, an HTTP client, onnxruntime) only when a
backend is made, so listing or validating models stays cheap.
"""
