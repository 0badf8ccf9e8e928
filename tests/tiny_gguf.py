"""Writes a random-weight, 2-layer `llama` GGUF (hidden 64) that llama.cpp loads in
milliseconds: the real backend path, without a real model."""

from __future__ import annotations

import string
from pathlib import Path

import numpy as np

WORDS = ["Yes", "No", "yes", "no", "answer", "premise", "hypothesis", "Question", "Answer", "A", "B", "C", "D",
         "the", "and", "order", "is", "event"]
CHAT_TEMPLATE = ("{% for m in messages %}<|user|>{{ m['content'] }}<|end|>{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>", "<|user|>", "<|end|>", "<|assistant|>"]
    types = [2, 3, 3, 3, 3, 3]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    pieces: list[str] = []
    for ch in string.ascii_letters + string.digits + string.punctuation:
        pieces.append(ch)
    pieces.append("\u2581")  # SentencePiece's space
    for w in WORDS:
        for word in (w, "\u2581" + w):
            for k in range(2, len(word) + 1):
                pieces.append(word[:k])
    seen = set(tokens)
    scores = [0.0] * len(tokens)
    for p in pieces:
        if p not in seen:
            seen.add(p)
            tokens.append(p)
            types.append(1)
            scores.append(float(len(p)))  # longer pieces win merges
    return tokens, scores, types


def write_tiny_llama(path: Path, chat_template: str | None = None, seed: int = 0, std: float = 0.5, nan: bool = False,
                     shapes: dict | None = None, dtype=np.float32, extra_tokens: tuple[tuple[str, int], ...] = (),
                     general: dict[str, str] | None = None) -> Path:
    """`nan`: one NaN in the output norm, so every logit is NaN (a broken model). `shapes`
    (n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, ctx) writes a larger model of that shape,
    its vocabulary padded with filler pieces, its weights tiled from one random block (fast; for
    timing, not for answers), stored as `dtype`.
    `extra_tokens`: (text, llama.cpp token type) pairs added to the vocabulary (a reasoning
    family's markers: 3 control, 4 user-defined). `general`: string metadata such as
    general.organization, as a converted model carries it."""
    import gguf

    tokens, scores, types = vocabulary()
    for text, kind in extra_tokens:
        tokens.append(text)
        types.append(kind)
        scores.append(0.0)
    sh = {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_head_kv": 4, "n_ff": 128, "n_vocab": len(tokens), "ctx": 4096,
          **(shapes or {})}
    for k in range(sh["n_vocab"] - len(tokens)):
        tokens.append(f"\u2581filler{k}")
        types.append(1)
        scores.append(-1.0)
    n_vocab, n_embd, n_ff, n_layer, n_head = len(tokens), sh["n_embd"], sh["n_ff"], sh["n_layer"], sh["n_head"]
    rng = np.random.default_rng(seed)
    block = rng.standard_normal(1 << 22).astype(np.float32) if shapes else None

    def w(*shape):
        if block is None:
            return (rng.standard_normal(shape) * std / np.sqrt(shape[-1])).astype(np.float32)
        n = int(np.prod(shape))
        start = int(rng.integers(0, block.size))
        flat = np.resize(np.roll(block, -start), n)
        return (flat.reshape(shape) * (std / np.sqrt(shape[-1]))).astype(dtype)

    wr = gguf.GGUFWriter(str(path), "llama")
    for key, value in (general or {}).items():
        wr.add_string(key, value)
    wr.add_context_length(sh["ctx"])
    wr.add_embedding_length(n_embd)
    wr.add_block_count(n_layer)
    wr.add_feed_forward_length(n_ff)
    wr.add_head_count(n_head)
    wr.add_head_count_kv(sh["n_head_kv"])
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_rope_dimension_count(n_embd // n_head)
    wr.add_rope_freq_base(10000.0)
    wr.add_vocab_size(n_vocab)
    wr.add_tokenizer_model("llama")
    wr.add_tokenizer_pre("default")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_unk_token_id(0)
    wr.add_add_bos_token(True)
    wr.add_add_eos_token(False)
    wr.add_add_space_prefix(False)
    if chat_template:
        wr.add_chat_template(chat_template)
    wr.add_tensor("token_embd.weight", w(n_vocab, n_embd) * 8)
    norm = np.ones(n_embd, dtype=np.float32)
    if nan:
        norm[0] = np.nan
    wr.add_tensor("output_norm.weight", norm)
    wr.add_tensor("output.weight", w(n_vocab, n_embd) * 8)
    for i in range(n_layer):
        wr.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        wr.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        kv = n_embd // n_head * sh["n_head_kv"]
        for name, rows in (("attn_q", n_embd), ("attn_k", kv), ("attn_v", kv), ("attn_output", n_embd)):
            wr.add_tensor(f"blk.{i}.{name}.weight", w(rows, n_embd))
        wr.add_tensor(f"blk.{i}.ffn_gate.weight", w(n_ff, n_embd))
        wr.add_tensor(f"blk.{i}.ffn_up.weight", w(n_ff, n_embd))
        wr.add_tensor(f"blk.{i}.ffn_down.weight", w(n_embd, n_ff))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return path


def write_tiny_lora(path: Path, scale: float = 1.0, rank: int = 4, alpha: float = 8.0, seed: int = 1,
                    targets: tuple[str, ...] = ("attn_q", "attn_v", "ffn_up"), n_layer: int = 2, n_embd: int = 64,
                    n_ff: int = 128, architecture: str = "llama", dtype=np.float16) -> Path:
    """A LoRA adapter GGUF for the model `write_tiny_llama` writes, laid out as llama.cpp's
    convert_lora_to_gguf.py writes one: general.type "adapter", adapter.type "lora",
    adapter.lora.alpha, and for each target weight `W` of shape (out, in) the tensors
    `W.lora_a` (rank, in) and `W.lora_b` (out, rank). `scale` multiplies B: 0 writes an adapter
    that changes nothing (B = 0, as a freshly initialised LoRA), anything else one that does."""
    import gguf

    rng = np.random.default_rng(seed)
    shapes = {"attn_q": (n_embd, n_embd), "attn_k": (n_embd, n_embd), "attn_v": (n_embd, n_embd),
              "attn_output": (n_embd, n_embd), "ffn_gate": (n_ff, n_embd), "ffn_up": (n_ff, n_embd), "ffn_down": (n_embd, n_ff)}
    wr = gguf.GGUFWriter(str(path), architecture)
    wr.add_type(gguf.GGUFType.ADAPTER)
    wr.add_string(gguf.Keys.Adapter.TYPE, "lora")
    wr.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    for i in range(n_layer):
        for name in targets:
            out, inp = shapes[name]
            a = (rng.standard_normal((rank, inp)) / np.sqrt(inp)).astype(dtype)
            b = (rng.standard_normal((out, rank)) * scale).astype(dtype)
            wr.add_tensor(f"blk.{i}.{name}.weight.lora_a", a)
            wr.add_tensor(f"blk.{i}.{name}.weight.lora_b", b)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return path
