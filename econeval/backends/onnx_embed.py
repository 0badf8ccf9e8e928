"""Sentence embedder on ONNX Runtime + `tokenizers` (kind `onnx`, the embedder role): a
BERT-family model.onnx with a tokenizer.json; CLS or mean pooling, L2-normalised, truncated at
max_length tokens, batched; the CUDA execution provider when present, the CPU otherwise. It
answers Similarity requests (the cosine similarity of two texts' embeddings)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import registry
from ..errors import ModelError, UsageError
from ..types import EMBEDDER, BackendInfo
from .base import Backend, BackendOptions, Settings, option


@dataclass(frozen=True)
class OnnxOptions(BackendOptions):
    path: str | None = option(None, "a folder with model.onnx and tokenizer.json")
    pooling: str = option("cls", "cls | mean")
    max_length: int = option(512, "tokens per text (longer texts are truncated)")
    licence: str = option("", "the weights' licence (shown by `econeval models list`)")
    threads: int | None = option(None, "ONNX Runtime intra-op threads (default: its own choice)")
    batch_size: int = option(16, "texts per ONNX Runtime call")
    sha256: str = option("", "model.onnx's sha256, checked when the embedder loads (`econeval models add-embedder` records it)")

    def check(self, where: str) -> None:
        if not self.path:
            raise UsageError(f"{where} needs a path (a folder with model.onnx and tokenizer.json)")
        if self.pooling not in ("cls", "mean"):
            raise UsageError(f"{where}: pooling must be 'cls' or 'mean'")
        if self.max_length < 1 or self.batch_size < 1:
            raise UsageError(f"{where}: max_length and batch_size must be positive")
        if self.sha256 and not (len(self.sha256) == 64 and all(c in "0123456789abcdef" for c in self.sha256)):
            raise UsageError(f"{where}: sha256 must be 64 lower-case hexadecimal digits")


def embedder_folder(spec, options: OnnxOptions) -> Path:
    """The folder of the weights; inside the one-file executable, its bundled copy when the
    configured one is not built."""
    folder = Path(spec.path_of(options.path))
    bundled = Path(getattr(sys, "_MEIPASS", "/nonexistent")) / "embedders" / folder.name
    if not (folder / "model.onnx").is_file() and (bundled / "model.onnx").is_file():
        return bundled
    return folder


registry.plugin("onnx", commands="econeval.backends.onnx_commands:models")  # `models add-embedder`


@registry.backend("onnx")
class OnnxEmbedder(Backend[OnnxOptions]):
    serves = (EMBEDDER,)
    implied_by = ("path",)
    Options = OnnxOptions
    description = "a sentence embedder exported to ONNX"

    @classmethod
    def from_path(cls, path: str):
        p = Path(path).expanduser()
        return {"path": str(p.resolve())} if p.is_dir() else None

    @classmethod
    def describe_spec(cls, spec) -> str:
        o = spec.options
        folder = Path(spec.path_of(o.get("path", "")))
        built = "built" if (folder / "model.onnx").is_file() else "not built"
        return f"{folder}  (pooling {o.get('pooling', 'cls')}, {built})"

    def __init__(self, spec, options: OnnxOptions | None = None, settings: Settings | None = None):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        super().__init__(spec, options or OnnxOptions.parse(spec.options, self.kind, f"embedder '{spec.name}'"), settings)
        options = self.options
        threads, batch_size = options.threads, options.batch_size
        folder = self.folder = embedder_folder(spec, options)
        model, tok = folder / "model.onnx", folder / "tokenizer.json"
        if not model.is_file() or not tok.is_file():
            raise ModelError(f"embedder '{spec.name}' is not built: {folder} lacks model.onnx or tokenizer.json",
                             hint="build the default with tools/build_embedder.sh, or point models.toml at your ONNX export")
        self.batch_size = batch_size
        from ..data import sha256_file

        self.sha256 = sha256_file(model)
        if options.sha256 and self.sha256 != options.sha256:
            raise ModelError(f"embedder '{spec.name}': {model} has sha256 {self.sha256[:12]}…, not the {options.sha256[:12]}… "
                             f"its entry records: the file changed since it was added",
                             hint="add it again (econeval models add-embedder) or correct the entry's sha256")
        self.tokenizer = Tokenizer.from_file(str(tok))
        self.tokenizer.enable_truncation(options.max_length)  # tokenizer.json sets none: long inputs would crash ORT
        self.tokenizer.no_padding()
        opts = ort.SessionOptions()
        if threads:  # default: ONNX Runtime's choice (all physical cores); tools/bench_embedder.py measured
            opts.intra_op_num_threads = threads  # 2 threads 2.07x the texts/s of 1 on a 2-core machine
        opts.log_severity_level = 3
        available = ort.get_available_providers()
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if "CUDAExecutionProvider" in available else ["CPUExecutionProvider"]
        try:
            self.session = ort.InferenceSession(str(model), sess_options=opts, providers=providers)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(f"onnxruntime could not load {model}: {exc}") from None
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.providers = self.session.get_providers()
        self.threads = threads or "onnxruntime default"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), hidden) float32, each row of norm 1."""
        out = np.zeros((len(texts), 0), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths pad less
        rows: dict[int, np.ndarray] = {}
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            encs = self.tokenizer.encode_batch([texts[i] for i in idx])
            width = max(len(e.ids) for e in encs)
            ids = np.zeros((len(encs), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, e in enumerate(encs):
                ids[r, : len(e.ids)] = e.ids
                mask[r, : len(e.ids)] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feed)[0]
            if self.options.pooling == "cls":
                vec = hidden[:, 0]
            else:
                m = mask[..., None].astype(hidden.dtype)
                vec = (hidden * m).sum(1) / np.maximum(m.sum(1), 1)
            vec = vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
            for r, i in enumerate(idx):
                rows[i] = vec[r].astype(np.float32)
        if rows:
            out = np.stack([rows[i] for i in range(len(texts))])
        return out

    def evaluate(self, requests: Sequence, on_done=None) -> list[float]:
        """Similarity requests: the cosine similarity of each pair's embeddings."""
        vecs = self.embed([r.a for r in requests] + [r.b for r in requests])
        n = len(requests)
        out = [float(vecs[i] @ vecs[n + i]) for i in range(n)]
        if on_done:
            for i in range(n):
                on_done(i)
        return out

    def info(self) -> BackendInfo:
        from ..data import sha256_file

        folder, o = self.folder, self.options
        sha, tok = self.sha256, sha256_file(folder / "tokenizer.json")
        model = {"name": self.spec.name, "path": str(folder), "source": self.spec.source, "sha256": sha,
                 "tokenizer_sha256": tok, "pooling": o.pooling,
                 "max_length": o.max_length, "licence": o.licence, "providers": self.providers,
                 "intra_op_threads": self.threads, "note": self.spec.description}
        return BackendInfo(kind=self.kind, model=model, n_ctx=o.max_length, device="gpu" if "CUDAExecutionProvider"
                           in self.providers else "cpu", schedule=f"batches of {self.batch_size} texts sorted by length",
                           chat_template_applied=False, composition_matters=False,
                           # what an embedder is: its weights, its tokenizer, its pooling and where it truncates
                           fixed_identity={"sha256": sha, "tokenizer_sha256": tok, "pooling": o.pooling,
                                           "max_length": o.max_length})
