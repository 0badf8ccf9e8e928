"""econeval: offline evaluation of language models on economics and finance reasoning."""

__version__ = "0.1.0"
