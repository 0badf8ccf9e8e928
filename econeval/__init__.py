"""econeval: offline evaluation of language models on economics and finance reasoning.

`econeval.evaluate(model, tasks=[...], selection=econeval.Limit(20), out=...)` runs tasks from
Python and returns the results document (see econeval.api); `model` names the model, or is an
`econeval.RunSpec` (econeval.run.spec's): the model with how it runs. The selections (`Full`, `Limit`,
`StratifiedSample`, `Shard`, and `from_flags`, as the command line makes them) are econeval.run.selection's."""

from .version import __version__


_API = ("evaluate", "score_predictions", "export_prompts")  # econeval.api's
_SELECTIONS = ("Full", "Limit", "StratifiedSample", "Shard", "from_flags")  # econeval.run.selection's
__all__ = [*_API, "RunSpec", *_SELECTIONS, "__version__"]


def __getattr__(name):
    if name in _API:  # imported on first use: `import econeval` stays light
        from . import api

        return getattr(api, name)
    if name == "RunSpec":
        from .run.spec import RunSpec

        return RunSpec
    if name in _SELECTIONS:
        from .run import selection

        return getattr(selection, name)
    raise AttributeError(f"module 'econeval' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (and the module's own), so that dir() and completion show the lazy ones."""
    return sorted({*globals(), *__all__})
