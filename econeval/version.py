"""econeval's version (the package's `econeval.__version__`): recorded in every run.json and export."""

__version__ = "0.3.0"
