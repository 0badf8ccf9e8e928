"""`econeval models add-embedder`: a Hugging Face BERT folder (config.json, tokenizer.json, and
model.safetensors or pytorch_model.bin) turned into the ONNX embedder econeval scores with
(onnx_embed.py), without torch, and registered in the user's models.toml.

The graph is written with the `onnx` package's helper API (the optional extra `add-embedder`)
from the weights as numpy arrays: input_ids, attention_mask and token_type_ids in,
last_hidden_state out, as transformers' BertModel computes it in eager mode (absolute positions,
additive attention mask of float32's minimum, LayerNorm after each residual)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .. import config
from ..data import sha256_file
from ..errors import ModelError, UsageError
from .bert_weights import BertConfig, WeightsError, read_checked, read_weights, weights_file

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
OPSET = 17  # LayerNormalization; ONNX Runtime 1.18 and later run it
PROTOBUF_LIMIT = 2**31 - (64 << 20)  # one model.onnx file (a protobuf) holds less than 2 GiB
CHECK_TEXTS = ("公司营业收入同比增长15%。", "Net profit rose 15% year on year.")


def onnx_package() -> Any:
    """The onnx package (the add-embedder extra), or one line saying how to install it."""
    try:
        import onnx
    except ImportError:
        raise UsageError("econeval models add-embedder needs the onnx package",
                         hint="pip install 'econeval[add-embedder]' (or onnx>=1.16)") from None
    return onnx


def bert_graph(cfg: BertConfig, w: dict[str, np.ndarray]) -> Any:
    """The ONNX model of the encoder (onnx.ModelProto)."""
    onnx = onnx_package()
    TensorProto, helper, numpy_helper = onnx.TensorProto, onnx.helper, onnx.numpy_helper
    H, heads = cfg.hidden_size, cfg.num_attention_heads
    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, value: Any) -> str:
        arr = np.asarray(value)
        inits.append(numpy_helper.from_array(arr.astype(np.float32) if arr.dtype.kind == "f" else arr, name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def linear(x: str, prefix: str, out: str) -> str:
        """x @ W.T + b, W of transformers' [out, in]."""
        y = node("MatMul", [x, const(prefix + ".weight.T", w[prefix + ".weight"].T.copy())], out + ".mm")
        return node("Add", [y, const(prefix + ".bias", w[prefix + ".bias"])], out)

    def norm(x: str, prefix: str, out: str) -> str:
        return node("LayerNormalization", [x, const(prefix + ".weight", w[prefix + ".weight"]), const(prefix + ".bias", w[prefix + ".bias"])],
                    out, axis=-1, epsilon=cfg.layer_norm_eps)

    def activation(x: str, out: str) -> str:
        if cfg.hidden_act == "relu":
            return node("Relu", [x], out)
        if cfg.hidden_act == "gelu":  # exact: x/2 (1 + erf(x / sqrt 2))
            erf = node("Erf", [node("Mul", [x, "inv_sqrt2"], out + ".s")], out + ".erf")
            return node("Mul", [node("Mul", [x, "half"], out + ".h"), node("Add", [erf, "one"], out + ".1e")], out)
        # gelu_new / gelu_pytorch_tanh: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = node("Mul", [node("Mul", [x, x], out + ".x2"), x], out + ".x3")
        inner = node("Mul", [node("Add", [x, node("Mul", [cube, "gelu_c"], out + ".cx3")], out + ".in"), "sqrt_2_pi"], out + ".arg")
        t = node("Tanh", [inner], out + ".tanh")
        return node("Mul", [node("Mul", [x, "half"], out + ".h"), node("Add", [t, "one"], out + ".1t")], out)

    scalars = {"one": 1.0, "mask_min": np.finfo(np.float32).min, "scale": 1 / np.sqrt(H // heads)}  # only those used: ORT warns of others
    if cfg.hidden_act == "gelu":
        scalars.update(half=0.5, inv_sqrt2=1 / np.sqrt(2))
    elif cfg.hidden_act != "relu":
        scalars.update(half=0.5, gelu_c=0.044715, sqrt_2_pi=np.sqrt(2 / np.pi))
    for name, value in scalars.items():
        const(name, np.float32(value))
    const("i0", np.int64(0))
    const("i1", np.int64(1))
    const("axes12", np.array([1, 2], dtype=np.int64))
    const("heads_shape", np.array([0, 0, heads, H // heads], dtype=np.int64))
    const("hidden_shape", np.array([0, 0, H], dtype=np.int64))

    seq = node("Gather", [node("Shape", ["input_ids"], "shape"), "i1"], "seq", axis=0)
    positions = node("Range", ["i0", seq, "i1"], "positions")
    e = node("Add", [node("Gather", [const("word", w["embeddings.word_embeddings.weight"]), "input_ids"], "e.word"),
                     node("Gather", [const("position", w["embeddings.position_embeddings.weight"]), positions], "e.pos")], "e.wp")
    e = node("Add", [e, node("Gather", [const("token_type", w["embeddings.token_type_embeddings.weight"]), "token_type_ids"], "e.type")], "e")
    h = norm(e, "embeddings.LayerNorm", "h0")
    # (1 - mask) * float32's minimum, [batch, 1, 1, seq]: what BertModel adds to the attention scores
    inv = node("Sub", ["one", node("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)], "mask.inv")
    bias = node("Unsqueeze", [node("Mul", [inv, "mask_min"], "mask.min"), "axes12"], "mask.bias")
    for i in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{i}."

        def split(x: str, perm: list[int], out: str) -> str:
            return node("Transpose", [node("Reshape", [x, "heads_shape"], out + ".r")], out, perm=perm)

        q = split(linear(h, p + "attention.self.query", f"l{i}.q"), [0, 2, 1, 3], f"l{i}.qh")
        k = split(linear(h, p + "attention.self.key", f"l{i}.k"), [0, 2, 3, 1], f"l{i}.kh")
        v = split(linear(h, p + "attention.self.value", f"l{i}.v"), [0, 2, 1, 3], f"l{i}.vh")
        scores = node("Add", [node("Mul", [node("MatMul", [q, k], f"l{i}.qk"), "scale"], f"l{i}.qks"), bias], f"l{i}.scores")
        ctx = node("MatMul", [node("Softmax", [scores], f"l{i}.p", axis=-1), v], f"l{i}.ctx")
        ctx = node("Reshape", [node("Transpose", [ctx], f"l{i}.ctx.t", perm=[0, 2, 1, 3]), "hidden_shape"], f"l{i}.ctx.h")
        att = linear(ctx, p + "attention.output.dense", f"l{i}.att")
        h = norm(node("Add", [att, h], f"l{i}.att.res"), p + "attention.output.LayerNorm", f"l{i}.h1")
        ff = activation(linear(h, p + "intermediate.dense", f"l{i}.ff1"), f"l{i}.act")
        ff = linear(ff, p + "output.dense", f"l{i}.ff2")
        out = "last_hidden_state" if i == cfg.num_hidden_layers - 1 else f"l{i}.out"
        h = norm(node("Add", [ff, h], f"l{i}.ff.res"), p + "output.LayerNorm", out)
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in ("input_ids", "attention_mask", "token_type_ids")]
    outs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", H])]
    model = helper.make_model(helper.make_graph(nodes, "bert", ins, outs, inits), opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="econeval models add-embedder")
    model.ir_version = 8  # what ONNX Runtime has read since 1.10
    return model


@dataclass(frozen=True)
class Added:
    name: str
    folder: Path
    registry: Path
    sha256: str
    bytes: int
    parameters: int
    seconds: float
    default: bool


def free_name(name: str) -> Path:
    """The cache folder a new embedder NAME is built into, once the name is known to be usable and
    free: no registered embedder has it and no folder of the cache holds it."""
    if not NAME.fullmatch(name):
        raise UsageError(f"--name {name!r}: use letters, digits and . _ - (at most 64, not starting with . _ -)")
    known = config.load_registry().embedders
    if name in known:
        raise UsageError(f"an embedder named '{name}' exists already (in {known[name].source})", hint="choose another --name")
    dest = config.cache_home() / "embedders" / name
    if os.path.lexists(dest):
        raise UsageError(f"{dest} exists already: another embedder was built under the name '{name}'",
                         hint="choose another --name, or delete that folder if no models.toml names it")
    return dest


def read_folder(src: Path) -> tuple[BertConfig, bytes, Path, dict[str, np.ndarray]]:
    """The folder's config, tokenizer.json's bytes, its weights file and the weights."""
    if not src.is_dir():
        raise UsageError(f"{src} is not a folder", hint="give the folder of a Hugging Face BERT model (config.json, tokenizer.json, weights)")
    cfg = BertConfig.read(src / "config.json")
    if not os.path.lexists(src / "tokenizer.json"):
        raise WeightsError(f"{src / 'tokenizer.json'}: no such file: the tokenizer is read from tokenizer.json (vocab.txt alone is not read)",
                           hint="where transformers is installed: AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR) writes it")
    tokenizer = read_checked(src / "tokenizer.json")
    if b'"model"' not in tokenizer:
        raise WeightsError(f"{src / 'tokenizer.json'}: not a tokenizers file (no model in it)")
    weights = weights_file(src)
    return cfg, tokenizer, weights, read_weights(weights, cfg)


def add_embedder(src: Path, name: str, pooling: str, make_default: bool = False,
                 say: Callable[[str], None] = lambda msg: None) -> Added:
    """Convert the BERT folder `src` into cache/embedders/NAME (model.onnx, tokenizer.json,
    embedder.json), check that ONNX Runtime loads it and embeds with it, and register it in the
    user's models.toml (the default embedder there with `make_default`)."""
    t0 = time.monotonic()
    onnx_package()
    if pooling not in ("cls", "mean"):
        raise UsageError(f"--pooling must be cls or mean, not {pooling!r}")
    dest = free_name(name)
    cfg, tokenizer, weights, w = read_folder(src)
    n_params = sum(a.size for a in w.values())
    say(f"read {weights.name}: BERT {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, vocab {cfg.vocab_size}, "
        f"{n_params / 1e6:.1f} M parameters")
    if 4 * n_params > PROTOBUF_LIMIT:
        raise WeightsError(f"{weights}: {n_params:,} parameters take more than the 2 GiB one model.onnx can hold")
    data = bert_graph(cfg, w).SerializeToString()
    del w
    sha, max_length = hashlib.sha256(data).hexdigest(), min(512, cfg.max_position_embeddings)
    about = {"name": name, "source": str(src.resolve()),
             "architecture": f"BERT {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, vocab {cfg.vocab_size}",
             "pooling": pooling, "max_length": max_length, "sha256": sha,
             "source_sha256": {"config.json": hashlib.sha256(read_checked(src / "config.json")).hexdigest(),
                               "tokenizer.json": hashlib.sha256(tokenizer).hexdigest(), weights.name: sha256_file(weights)},
             "built_by": "econeval models add-embedder"}
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{name}."))
    try:  # built beside its place and moved there whole once ONNX Runtime has run it
        (stage / "model.onnx").write_bytes(data)
        (stage / "tokenizer.json").write_bytes(tokenizer)
        about["check"] = _check(stage, name, pooling, max_length, cfg)
        (stage / "embedder.json").write_text(json.dumps(about, indent=2, ensure_ascii=False) + "\n")
        stage.chmod(0o755)
        stage.rename(dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    entry: dict[str, str | int] = {"path": str(dest), "pooling": pooling, "max_length": max_length, "sha256": sha,
                                   "description": f"added by econeval models add-embedder from {src.resolve()}"}
    try:
        registry = config.register_user_entry("embedders", name, entry, make_default=make_default)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return Added(name, dest, registry, sha, len(data), n_params, time.monotonic() - t0, make_default)


def _check(folder: Path, name: str, pooling: str, max_length: int, cfg: BertConfig) -> dict:
    """Load the built folder as the embedder does and embed two texts: finite, of the model's width,
    and the tokenizer's ids within the vocabulary."""
    from ..config import ModelSpec
    from .onnx_embed import OnnxEmbedder

    emb = OnnxEmbedder(ModelSpec(name=name, options={"path": str(folder), "pooling": pooling, "max_length": max_length}))
    size = emb.tokenizer.get_vocab_size()
    if size > cfg.vocab_size:
        raise WeightsError(f"tokenizer.json has {size:,} tokens, more than the {cfg.vocab_size:,} rows of the model's embeddings",
                           hint="the tokenizer and the weights are not of one model")
    vecs = emb.embed(list(CHECK_TEXTS))
    if vecs.shape != (len(CHECK_TEXTS), cfg.hidden_size) or not np.isfinite(vecs).all():
        raise ModelError(f"the converted model gave embeddings of shape {vecs.shape} (finite: {bool(np.isfinite(vecs).all())})")
    return {"texts": list(CHECK_TEXTS), "cosine": round(float(vecs[0] @ vecs[1]), 6), "providers": emb.providers}
