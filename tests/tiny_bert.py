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
