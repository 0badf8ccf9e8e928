"""Sentence embedder on ONNX Runtime + `tokenizers`: a BERT-family model.onnx with a
tokenizer.json; CLS or mean pooling, L2-normalised, truncated at max_length tokens, batched;
the CUDA execution provider when present, the CPU otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..config import EmbedderSpec
from ..errors import ModelError


class OnnxEmbedder:
    def __init__(self, spec: EmbedderSpec, threads: int | None = None, batch_size: int = 16):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        folder = Path(spec.path)
        model, tok = folder / "model.onnx", folder / "tokenizer.json"
        if not model.is_file() or not tok.is_file():
            raise ModelError(f"embedder '{spec.name}' is not built: {folder} lacks model.onnx or tokenizer.json",
                             hint="build the default with tools/build_embedder.sh, or point models.toml at your ONNX export")
        self.spec, self.batch_size = spec, batch_size
        self.tokenizer = Tokenizer.from_file(str(tok))
        self.tokenizer.enable_truncation(spec.max_length)  # tokenizer.json sets none: long inputs would crash ORT
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
            if self.spec.pooling == "cls":
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

    def describe(self) -> dict[str, Any]:
        from ..data import sha256_file

        folder = Path(self.spec.path)
        return {"name": self.spec.name, "path": str(folder), "source": self.spec.source,
                "sha256": sha256_file(folder / "model.onnx"), "tokenizer_sha256": sha256_file(folder / "tokenizer.json"),
                "pooling": self.spec.pooling, "max_length": self.spec.max_length, "licence": self.spec.licence,
                "providers": self.providers, "intra_op_threads": self.threads,
                "note": self.spec.description}
