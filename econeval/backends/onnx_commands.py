"""`econeval models add-embedder`: the ONNX embedder backend's own command, added to the CLI's
`models` group through the registry (the core CLI names no backend)."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def models():
    """The model registry (models.toml) and the backends."""


@models.command("add-embedder")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--name", required=True, help="The embedder's name (for --embedder NAME and models.toml).")
@click.option("--pooling", required=True, type=click.Choice(["cls", "mean"]),
              help="How a text's vector is made from the model's: the first token's (cls: bge) or the mean of all (mean: m3e).")
@click.option("--default", "make_default", is_flag=True, help="Also make it the default embedder (default_embedder in your models.toml).")
def models_add_embedder(folder, name, pooling, make_default):
    """Convert a Hugging Face BERT folder (config.json, tokenizer.json, model.safetensors or
    pytorch_model.bin) into an ONNX embedder in econeval's cache, without torch, and register it in
    your models.toml with its sha256. Needs the onnx package (the add-embedder extra)."""
    from .bert_onnx import add_embedder

    done = add_embedder(folder, name, pooling, make_default, say=lambda msg: click.echo(f"econeval: {msg}", err=True))
    click.echo(f"embedder '{done.name}': {done.folder} (model.onnx {done.bytes / 2**20:.1f} MiB, sha256 {done.sha256}), "
               f"built in {done.seconds:.1f} s")
    click.echo(f"registered in {done.registry}" + ("; it is the default embedder there" if done.default else "")
               + f"; score with --embedder {done.name}")
