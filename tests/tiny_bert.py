"""A tiny random-weight BERT-style ONNX encoder plus a WordPiece tokenizer.json, written in
milliseconds: the real onnxruntime + tokenizers path of the embedder, without a real model.
Inputs input_ids / attention_mask / token_type_ids, output last_hidden_state, like an export."""

from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np

CHARS = "公司营业收入同比增长下降利润风险建议市场政策银行股票基金投资经济金融发展预期业绩行业产品中国央行宣布存款准备金率个百分点释放长期资金约万亿元"


def write_tokenizer(path: Path) -> int:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + sorted(set(CHARS)) + list(string.ascii_lowercase + string.digits + string.punctuation)
    ids = {t: i for i, t in enumerate(dict.fromkeys(vocab))}
    tok = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(str(path))
    return len(ids)


def write_tiny_bert(folder: Path, hidden: int = 32, seed: int = 0) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    n_vocab = write_tokenizer(folder / "tokenizer.json")
    rng = np.random.default_rng(seed)
    inits = {
        "word": rng.standard_normal((n_vocab, hidden)), "pos": rng.standard_normal((512, hidden)) * 0.1,
        "type": rng.standard_normal((2, hidden)) * 0.1,
        "wq": rng.standard_normal((hidden, hidden)) / np.sqrt(hidden), "wk": rng.standard_normal((hidden, hidden)) / np.sqrt(hidden),
        "wv": rng.standard_normal((hidden, hidden)) / np.sqrt(hidden), "wo": rng.standard_normal((hidden, hidden)) / np.sqrt(hidden),
        "w1": rng.standard_normal((hidden, 2 * hidden)) / np.sqrt(hidden), "w2": rng.standard_normal((2 * hidden, hidden)) / np.sqrt(2 * hidden),
        "gamma": np.ones(hidden), "beta": np.zeros(hidden),
        "scale": np.array(1 / np.sqrt(hidden)), "neg": np.array(-1e4), "one": np.array(1.0),
        "zero_i": np.array(0, dtype=np.int64), "one_i": np.array(1, dtype=np.int64), "axis1": np.array([1], dtype=np.int64),
    }
    tensors = [numpy_helper.from_array(v.astype(np.float32) if v.dtype.kind == "f" else v, k) for k, v in inits.items()]
    N = helper.make_node
    nodes = [
        N("Shape", ["input_ids"], ["shape"]), N("Gather", ["shape", "one_i"], ["seq"], axis=0),
        N("Range", ["zero_i", "seq", "one_i"], ["positions"]),
        N("Gather", ["word", "input_ids"], ["e_word"]), N("Gather", ["pos", "positions"], ["e_pos"]),
        N("Gather", ["type", "token_type_ids"], ["e_type"]),
        N("Add", ["e_word", "e_pos"], ["e1"]), N("Add", ["e1", "e_type"], ["e2"]),
        N("LayerNormalization", ["e2", "gamma", "beta"], ["h0"], axis=-1),
        N("MatMul", ["h0", "wq"], ["q"]), N("MatMul", ["h0", "wk"], ["k"]), N("MatMul", ["h0", "wv"], ["v"]),
        N("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), N("MatMul", ["q", "kt"], ["s0"]), N("Mul", ["s0", "scale"], ["s1"]),
        N("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT), N("Sub", ["one", "maskf"], ["inv"]),
        N("Mul", ["inv", "neg"], ["bias0"]), N("Unsqueeze", ["bias0", "axis1"], ["bias"]), N("Add", ["s1", "bias"], ["s2"]),
        N("Softmax", ["s2"], ["p"], axis=-1), N("MatMul", ["p", "v"], ["c"]), N("MatMul", ["c", "wo"], ["o"]),
        N("Add", ["h0", "o"], ["r1"]), N("LayerNormalization", ["r1", "gamma", "beta"], ["h1"], axis=-1),
        N("MatMul", ["h1", "w1"], ["f0"]), N("Tanh", ["f0"], ["f1"]), N("MatMul", ["f1", "w2"], ["f2"]),
        N("Add", ["h1", "f2"], ["r2"]), N("LayerNormalization", ["r2", "gamma", "beta"], ["last_hidden_state"], axis=-1),
    ]
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in ("input_ids", "attention_mask", "token_type_ids")]
    out = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden])]
    graph = helper.make_graph(nodes, "tiny_bert", ins, out, tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    (folder / "embedder.json").write_text(json.dumps({"name": "tiny-bert", "hidden": hidden}))
    return folder


# ---- a Hugging Face BERT folder (config.json, tokenizer.json, weights), for `models add-embedder` --
def hf_bert_weights(cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights of transformers' BertModel names and shapes (Linear weights [out, in]), a
    `bert.` prefix and a pooler as a BertForPreTraining checkpoint has them."""
    rng = np.random.default_rng(seed)
    H, I = cfg["hidden_size"], cfg["intermediate_size"]

    def r(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": r(cfg["vocab_size"], H, scale=1.0),
         "embeddings.position_embeddings.weight": r(cfg["max_position_embeddings"], H),
         "embeddings.token_type_embeddings.weight": r(cfg["type_vocab_size"], H),
         "embeddings.LayerNorm.weight": 1 + r(H), "embeddings.LayerNorm.bias": r(H),
         "embeddings.position_ids": np.arange(cfg["max_position_embeddings"], dtype=np.int64)[None]}  # a buffer, not read
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            w[p + name + ".weight"], w[p + name + ".bias"] = r(H, H, scale=1 / np.sqrt(H)), r(H)
        w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"] = r(I, H, scale=1 / np.sqrt(H)), r(I)
        w[p + "output.dense.weight"], w[p + "output.dense.bias"] = r(H, I, scale=1 / np.sqrt(I)), r(H)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + norm + ".weight"], w[p + norm + ".bias"] = 1 + r(H), r(H)
    w = {"bert." + k: v for k, v in w.items()}
    w["bert.pooler.dense.weight"], w["bert.pooler.dense.bias"] = r(H, H), r(H)
    return w


def safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    """The safetensors format (huggingface/safetensors): an 8-byte little-endian header length, a
    JSON header (dtype, shape, byte range of each tensor), padded with spaces to 8 bytes, the data."""
    codes = {"float32": "F32", "float16": "F16", "int64": "I64"}
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": codes[arr.dtype.name], "shape": list(arr.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    return len(head).to_bytes(8, "little") + head + b"".join(blobs)


def torch_zip_bytes(tensors: dict[str, np.ndarray], prefix: str = "archive", pickle_bytes: bytes | None = None) -> bytes:
    """torch.save's zip format, written without torch: `<prefix>/data.pkl` (protocol 2, the opcodes
    torch writes for a state dict: each tensor torch._utils._rebuild_tensor_v2 of a persistent
    storage id ('storage', torch.FloatStorage, key, location, numel)), `<prefix>/data/<key>` the
    raw little-endian bytes, `<prefix>/version`, `<prefix>/byteorder`. `pickle_bytes` replaces
    data.pkl (a hostile pickle)."""
    import io
    import struct
    import zipfile

    def text(s: str) -> bytes:  # BINUNICODE
        b = s.encode()
        return b"X" + struct.pack("<I", len(b)) + b

    def num(n: int) -> bytes:  # BININT
        return b"J" + struct.pack("<i", n)

    def tup(items) -> bytes:  # MARK ... TUPLE
        return b"(" + b"".join(items) + b"t"

    storages = {"float32": "FloatStorage", "float16": "HalfStorage", "int64": "LongStorage"}
    pkl = [b"\x80\x02}("]  # PROTO 2, EMPTY_DICT, MARK
    for key, (name, arr) in enumerate(tensors.items()):
        pid = tup([text("storage"), b"ctorch\n" + storages[arr.dtype.name].encode() + b"\n", text(str(key)), text("cpu"), num(arr.size)]) + b"Q"
        strides = [int(np.prod(arr.shape[i + 1:])) for i in range(arr.ndim)]
        args = tup([pid, num(0), tup(map(num, arr.shape)), tup(map(num, strides)), b"\x89", b"ccollections\nOrderedDict\n)R"])
        pkl.append(text(name) + b"ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R")
    pkl.append(b"u.")  # SETITEMS, STOP
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{prefix}/data.pkl", pickle_bytes if pickle_bytes is not None else b"".join(pkl))
        z.writestr(f"{prefix}/byteorder", b"little")
        for key, arr in enumerate(tensors.values()):
            z.writestr(f"{prefix}/data/{key}", np.ascontiguousarray(arr).tobytes())
        z.writestr(f"{prefix}/version", b"3\n")
    return out.getvalue()


def write_hf_bert(folder: Path, fmt: str = "safetensors", hidden: int = 32, layers: int = 2, heads: int = 4, act: str = "gelu",
                  seed: int = 0, **overrides) -> tuple[dict, dict[str, np.ndarray]]:
    """A tiny random BERT as a Hugging Face folder: config.json, tokenizer.json and model.safetensors
    (fmt "safetensors") or pytorch_model.bin (fmt "bin"); returns the config and the weights."""
    folder.mkdir(parents=True, exist_ok=True)
    n_vocab = write_tokenizer(folder / "tokenizer.json")
    cfg = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": n_vocab + 3, "hidden_size": hidden,
           "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": 2 * hidden, "max_position_embeddings": 64,
           "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": act, "position_embedding_type": "absolute", **overrides}
    w = hf_bert_weights(cfg, seed)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    if fmt == "safetensors":
        (folder / "model.safetensors").write_bytes(safetensors_bytes(w))
    else:
        (folder / "pytorch_model.bin").write_bytes(torch_zip_bytes(w))
    return cfg, w


def bert_forward(cfg: dict, w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """transformers' BertModel (eager attention) in numpy, float64: last_hidden_state [batch, seq, hidden]."""
    import math

    w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in w.items()}
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    dh = H // nh

    def ln(x, p):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + cfg["layer_norm_eps"]) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    def act(x):
        if cfg["hidden_act"] == "gelu":
            return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
        if cfg["hidden_act"] == "relu":
            return np.maximum(x, 0)
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    B, S = ids.shape
    h = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:S] + w["embeddings.token_type_embeddings.weight"][0]
    h = ln(h, "embeddings.LayerNorm")
    bias = (1.0 - mask[:, None, None, :]) * np.finfo(np.float32).min
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def heads(x):
            return x.reshape(B, S, nh, dh).transpose(0, 2, 1, 3)

        q, k, v = (heads(lin(h, p + "attention.self." + n)) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + bias
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
        h = ln(lin(ctx, p + "attention.output.dense") + h, p + "attention.output.LayerNorm")
        h = ln(lin(act(lin(h, p + "intermediate.dense")), p + "output.dense") + h, p + "output.LayerNorm")
    return h
