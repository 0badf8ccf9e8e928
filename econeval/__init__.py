"""econeval: offline evaluation of language models on economics and finance reasoning.

`econeval.evaluate(model=..., tasks=[...], limit=..., out=...)` runs tasks from Python and
returns the results document (see econeval.api)."""

__version__ = "0.1.0"


def __getattr__(name):
    if name == "evaluate":  # imported on first use: `import econeval` stays light
        from .api import evaluate

        return evaluate
    raise AttributeError(name)
