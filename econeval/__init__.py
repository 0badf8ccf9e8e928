"""econeval: offline evaluation of language models on economics and finance reasoning.

`econeval.evaluate(model=..., tasks=[...], selection=econeval.Limit(20), out=...)` runs tasks
from Python and returns the results document (see econeval.api); the selections (`Full`, `Limit`,
`StratifiedSample`, `Shard`, and `from_flags`, as the command line makes them) are econeval.selection's."""

__version__ = "0.1.0"


def __getattr__(name):
    if name in ("evaluate", "score_predictions", "export_prompts"):  # imported on first use: `import econeval` stays light
        from . import api

        return getattr(api, name)
    if name in ("Full", "Limit", "StratifiedSample", "Shard", "from_flags"):
        from . import selection

        return getattr(selection, name)
    raise AttributeError(name)
