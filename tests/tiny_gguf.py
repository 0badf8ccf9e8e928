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


def write_tiny_llama(path: Path, chat_template: str | None = None, seed: int = 0, std: float = 0.5, nan: bool = False) -> Path:
    """`nan`: one NaN in the output norm, so every logit is NaN (a broken model)."""
    import gguf

    tokens, scores, types = vocabulary()
    n_vocab, n_embd, n_ff, n_layer, n_head = len(tokens), 64, 128, 2, 4
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.standard_normal(shape) * std / np.sqrt(shape[-1])).astype(np.float32)

    wr = gguf.GGUFWriter(str(path), "llama")
    wr.add_context_length(512)
    wr.add_embedding_length(n_embd)
    wr.add_block_count(n_layer)
    wr.add_feed_forward_length(n_ff)
    wr.add_head_count(n_head)
    wr.add_head_count_kv(n_head)
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
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            wr.add_tensor(f"blk.{i}.{name}.weight", w(n_embd, n_embd))
        wr.add_tensor(f"blk.{i}.ffn_gate.weight", w(n_ff, n_embd))
        wr.add_tensor(f"blk.{i}.ffn_up.weight", w(n_ff, n_embd))
        wr.add_tensor(f"blk.{i}.ffn_down.weight", w(n_embd, n_ff))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return path
