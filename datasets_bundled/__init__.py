"""Versioned benchmark data: committed manifests, JSONL built by `econeval data build`."""
