"""econeval: offline evaluation of language models on economics and finance reasoning.

`econeval.evaluate(model=..., tasks=[...], limit=..., out=...)` runs tasks from Python and
returns the results document (see econeval.api)."""

__version__ = "0.1.0"


def __getattr__(name):
    if name in ("evaluate", "score_predictions", "export_prompts"):  # imported on first use: `import econeval` stays light
        from . import api

        return getattr(api, name)
    raise AttributeError(name)
