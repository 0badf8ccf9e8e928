"""The GPU check's model: a random-weight `llama` GGUF of Mistral 7B v0.3's shapes with Mistral
7B v0.3's own SentencePiece vocabulary (32,768 pieces, from mistral-common's `tokenizer.model.v3`,
which tools/gpu_bundle.py carries), written straight as Q4_K_M: no F16 file, no quantizer run.

Q4_K_M is llama.cpp's mix (llama-quant.cpp): Q6_K for `output`, and for `attn_v` and `ffn_down`
in the layers `use_more_bits` picks (the first and last eighth, every third between); Q4_K for
every other matrix; the norms F32. Each block is valid: 6-bit sub-block scales and minimums, fp16
super-block scales chosen so that the dequantized weights have mean 0 and standard deviation
0.5 / sqrt(columns) (as tests/tiny_gguf.py's random models); the 4- and 6-bit quants are random
bytes, cut at random offsets from one random pool (fast: the 7B file is mostly a copy). The
numbers mean nothing; the shapes, types, vocabulary and so the prompt lengths are Mistral's.

Needs numpy and gguf only (no llama.cpp): gpu_check.sh writes it while llama.cpp compiles.

    python tools/gpu_model.py OUT.gguf --vocab tokenizer.model.v3 [--tiny]
"""

from __future__ import annotations

import argparse
import json
import struct
import time
from pathlib import Path

import numpy as np

# Mistral 7B v0.3 (its config.json): the vocabulary's size comes from the tokenizer
MISTRAL_7B = {"n_layer": 32, "n_embd": 4096, "n_head": 32, "n_head_kv": 8, "n_ff": 14336, "ctx": 32768, "rope_theta": 1e6}
# the dry run's: two small layers, the same real vocabulary (n_embd and n_ff multiples of 256, the K-quant block)
TINY = {"n_layer": 2, "n_embd": 256, "n_head": 4, "n_head_kv": 2, "n_ff": 512, "ctx": 32768, "rope_theta": 1e6}
QK_K = 256
Q4_K_BYTES, Q6_K_BYTES = 144, 210
FTYPE_Q4_K_M = 15  # llama_ftype LLAMA_FTYPE_MOSTLY_Q4_K_M


# ---- the SentencePiece model (protobuf, read by hand: the GPU machine needs no sentencepiece) ----
def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _fields(b: bytes):
    """(field number, value) of a protobuf message: ints for varints, bytes otherwise."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
            yield num, v
        elif wire == 1:
            yield num, b[i:i + 8]
            i += 8
        elif wire == 2:
            n, i = _varint(b, i)
            yield num, b[i:i + n]
            i += n
        elif wire == 5:
            yield num, b[i:i + 4]
            i += 4
        else:
            raise ValueError(f"protobuf wire type {wire} at byte {i}: not a SentencePiece model")


def read_vocab(path: Path) -> dict:
    """A SentencePiece ModelProto: pieces (1: piece, 2: score, 3: type), the normalizer's
    add_dummy_prefix (3.3) and remove_extra_whitespaces (3.4). SentencePiece's piece types are
    llama.cpp's token types (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)."""
    tokens: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    normalizer: dict[int, object] = {}
    for num, value in _fields(Path(path).read_bytes()):
        if num == 1:
            piece, score, kind = "", 0.0, 1
            for n2, v2 in _fields(value):  # type: ignore[arg-type]
                if n2 == 1:
                    piece = v2.decode("utf-8")  # type: ignore[union-attr]
                elif n2 == 2:
                    score = struct.unpack("<f", v2)[0]  # type: ignore[arg-type]
                elif n2 == 3:
                    kind = int(v2)  # type: ignore[arg-type]
            tokens.append(piece)
            scores.append(score)
            types.append(kind)
        elif num == 3:
            normalizer = dict(_fields(value))  # type: ignore[arg-type]
    if not tokens:
        raise ValueError(f"{path}: no pieces: not a SentencePiece model")
    return {"tokens": tokens, "scores": scores, "types": types,
            "add_dummy_prefix": bool(normalizer.get(3, 1)), "remove_extra_whitespaces": bool(normalizer.get(4, 1)),
            "bos": tokens.index("<s>"), "eos": tokens.index("</s>"), "unk": tokens.index("<unk>")}


# ---- K-quant blocks ------------------------------------------------------------------------------
def _q4_k_scales(sc: int, m: int) -> bytes:
    """The 12 bytes of a Q4_K block's eight 6-bit scales and minimums (all `sc` and `m`), packed
    as ggml's get_scale_min_k4 reads them."""
    q = [0] * 12
    for j in range(4):
        q[j] = (sc & 63) | ((sc >> 4) << 6)
        q[j + 4] = (m & 63) | ((m >> 4) << 6)
        q[j + 8] = (sc & 0xF) | ((m & 0xF) << 4)
    return bytes(q)


SC4 = 8  # Q4_K sub-block scale and minimum (6-bit); the fp16 d and dmin carry the size


def q4_k_header(sigma: float) -> bytes:
    """d, dmin, scales: w = d·8·q − dmin·8 with q uniform in 0..15 (mean 7.5, sd 4.61): mean 0, sd sigma."""
    d = sigma / (SC4 * 4.61)
    return np.array([d, 7.5 * d], dtype=np.float16).tobytes() + _q4_k_scales(SC4, SC4)


SC6 = 2  # Q6_K sub-block scale (int8): keeps d a normal fp16 down to sigma 0.004


def q6_k_tail(sigma: float) -> bytes:
    """scales[16], d: w = d·2·(q − 32) with q uniform in 0..63 (mean 31.5, sd 18.5): sd sigma."""
    return bytes([SC6] * 16) + np.array([sigma / (SC6 * 18.5)], dtype=np.float16).tobytes()


class Blocks:
    """Quantized matrices from one pool of random bytes (each matrix a copy cut at a random offset)."""

    def __init__(self, seed: int = 0, pool_mib: int = 160):
        self.rng = np.random.default_rng(seed)
        self.pool = np.frombuffer(self.rng.bytes(pool_mib << 20), dtype=np.uint8)

    def _random(self, n: int) -> np.ndarray:
        if n > self.pool.size:
            return np.resize(self.pool, n)
        start = int(self.rng.integers(0, self.pool.size - n + 1))
        return self.pool[start:start + n]

    def q4_k(self, rows: int, cols: int, sigma: float) -> np.ndarray:
        nb = rows * cols // QK_K
        out = np.empty((nb, Q4_K_BYTES), dtype=np.uint8)
        out[:, :16] = np.frombuffer(q4_k_header(sigma), dtype=np.uint8)
        out[:, 16:] = self._random(nb * 128).reshape(nb, 128)
        return out.reshape(rows, cols // QK_K * Q4_K_BYTES)

    def q6_k(self, rows: int, cols: int, sigma: float) -> np.ndarray:
        nb = rows * cols // QK_K
        out = np.empty((nb, Q6_K_BYTES), dtype=np.uint8)
        out[:, :192] = self._random(nb * 192).reshape(nb, 192)  # ql (4 low bits), qh (2 high bits): all values valid
        out[:, 192:] = np.frombuffer(q6_k_tail(sigma), dtype=np.uint8)
        return out.reshape(rows, cols // QK_K * Q6_K_BYTES)


def use_more_bits(i: int, n: int) -> bool:
    """llama-quant.cpp's choice of the layers whose attn_v and ffn_down get Q6_K in Q4_K_M."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensors(sh: dict, n_vocab: int) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, (rows, columns) or (n,), type) of every tensor, in the file's order: Q4_K_M's mix."""
    e, ff, n = sh["n_embd"], sh["n_ff"], sh["n_layer"]
    kv = e // sh["n_head"] * sh["n_head_kv"]
    out: list[tuple[str, tuple[int, ...], str]] = [("token_embd.weight", (n_vocab, e), "Q4_K"), ("output_norm.weight", (e,), "F32"),
                                                   ("output.weight", (n_vocab, e), "Q6_K")]
    for i in range(n):
        more = "Q6_K" if use_more_bits(i, n) else "Q4_K"
        out += [(f"blk.{i}.attn_norm.weight", (e,), "F32"), (f"blk.{i}.attn_q.weight", (e, e), "Q4_K"),
                (f"blk.{i}.attn_k.weight", (kv, e), "Q4_K"), (f"blk.{i}.attn_v.weight", (kv, e), more),
                (f"blk.{i}.attn_output.weight", (e, e), "Q4_K"), (f"blk.{i}.ffn_norm.weight", (e,), "F32"),
                (f"blk.{i}.ffn_gate.weight", (ff, e), "Q4_K"), (f"blk.{i}.ffn_up.weight", (ff, e), "Q4_K"),
                (f"blk.{i}.ffn_down.weight", (e, ff), more)]
    return out


def write_model(path: Path, vocab_file: Path, shapes: dict | None = None, seed: int = 0) -> dict:
    """Write the model; returns what model.json records (shapes, vocabulary, tensor types, bytes, seconds)."""
    import gguf

    t0 = time.monotonic()
    sh = dict(shapes or MISTRAL_7B)
    voc = read_vocab(vocab_file)
    n_vocab = len(voc["tokens"])
    if sh["n_embd"] % QK_K or sh["n_ff"] % QK_K:
        raise ValueError("n_embd and n_ff must be multiples of 256 (the K-quant block)")
    plan = tensors(sh, n_vocab)
    qtype = {"Q4_K": gguf.GGMLQuantizationType.Q4_K, "Q6_K": gguf.GGMLQuantizationType.Q6_K}
    bpb = {"Q4_K": Q4_K_BYTES, "Q6_K": Q6_K_BYTES}

    wr = gguf.GGUFWriter(str(path), "llama")
    wr.add_name("random-weight Mistral-7B-v0.3-shaped (econeval GPU check)" if shapes is None else "random-weight tiny llama, Mistral v3 vocabulary")
    wr.add_context_length(sh["ctx"])
    wr.add_embedding_length(sh["n_embd"])
    wr.add_block_count(sh["n_layer"])
    wr.add_feed_forward_length(sh["n_ff"])
    wr.add_head_count(sh["n_head"])
    wr.add_head_count_kv(sh["n_head_kv"])
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_rope_dimension_count(sh["n_embd"] // sh["n_head"])
    wr.add_rope_freq_base(sh["rope_theta"])
    wr.add_vocab_size(n_vocab)
    wr.add_file_type(FTYPE_Q4_K_M)
    # the tokenizer as convert_hf_to_gguf.py writes a SentencePiece llama vocabulary (Mistral's GGUFs)
    wr.add_tokenizer_model("llama")
    wr.add_tokenizer_pre("default")
    wr.add_token_list(voc["tokens"])
    wr.add_token_scores(voc["scores"])
    wr.add_token_types(voc["types"])
    wr.add_bos_token_id(voc["bos"])
    wr.add_eos_token_id(voc["eos"])
    wr.add_unk_token_id(voc["unk"])
    wr.add_add_bos_token(True)
    wr.add_add_eos_token(False)
    wr.add_add_space_prefix(voc["add_dummy_prefix"])
    wr.add_remove_extra_whitespaces(voc["remove_extra_whitespaces"])
    for name, shape, kind in plan:  # the header first, then each tensor's bytes as it is made (memory stays small)
        if kind == "F32":
            wr.add_tensor_info(name, shape, np.dtype(np.float32), shape[0] * 4)
        else:
            rows, cols = shape
            wr.add_tensor_info(name, (rows, cols // QK_K * bpb[kind]), np.dtype(np.uint8), rows * cols // QK_K * bpb[kind],
                               raw_dtype=qtype[kind])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_ti_data_to_file()
    blocks = Blocks(seed, pool_mib=160 if shapes is None else 16)
    counts = {"F32": 0, "Q4_K": 0, "Q6_K": 0}
    for name, shape, kind in plan:
        counts[kind] += 1
        if kind == "F32":
            wr.write_tensor_data(np.ones(shape, dtype=np.float32))
            continue
        rows, cols = shape
        sigma = 0.5 / np.sqrt(cols) * (8 if name in ("token_embd.weight", "output.weight") else 1)  # as tiny_gguf's
        wr.write_tensor_data(blocks.q4_k(rows, cols, sigma) if kind == "Q4_K" else blocks.q6_k(rows, cols, sigma))
    wr.close()
    n_params = sum(int(np.prod(s)) for _, s, _ in plan)
    return {"shapes": {**sh, "n_vocab": n_vocab}, "path": str(path), "bytes": path.stat().st_size, "n_params": n_params,
            "ftype": "Q4_K_M (llama.cpp's mix, written directly)", "tensor_types": counts,
            "vocabulary": {"file": Path(vocab_file).name, "pieces": n_vocab, "add_space_prefix": voc["add_dummy_prefix"],
                           "control_tokens": voc["types"].count(3), "byte_tokens": voc["types"].count(6)},
            "write_s": round(time.monotonic() - t0, 1)}


def check_blocks(seed: int = 0) -> dict:
    """Dequantize a block matrix of each type with gguf's reference code: finite, mean ~0, sd ~sigma."""
    from gguf import GGMLQuantizationType, quants

    b = Blocks(seed, pool_mib=1)
    out = {}
    for kind, make, qt in (("Q4_K", b.q4_k, GGMLQuantizationType.Q4_K), ("Q6_K", b.q6_k, GGMLQuantizationType.Q6_K)):
        sigma = 0.5 / np.sqrt(4096)
        w = quants.dequantize(make(64, 4096, sigma), qt)
        if w.shape != (64, 4096) or not np.isfinite(w).all():
            raise ValueError(f"{kind}: dequantized blocks are not finite or of the wrong shape")
        out[kind] = {"sigma": round(float(sigma), 6), "mean": round(float(w.mean()), 6), "sd": round(float(w.std()), 6)}
        if abs(out[kind]["mean"]) > 0.1 * sigma or not 0.85 * sigma < out[kind]["sd"] < 1.15 * sigma:
            raise ValueError(f"{kind}: dequantized weights {out[kind]} are not centred at 0 with sd {sigma:.5f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--vocab", type=Path, required=True, help="the SentencePiece tokenizer.model.v3")
    ap.add_argument("--tiny", action="store_true", help="two small layers (the dry run's), the same vocabulary")
    ap.add_argument("--json", type=Path, help="also write what was written here (model.json)")
    args = ap.parse_args()
    info = {"block_check": check_blocks(), **write_model(args.out, args.vocab, TINY if args.tiny else None)}
    if args.json:
        args.json.write_text(json.dumps(info, indent=1))
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
