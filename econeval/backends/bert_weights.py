"""A Hugging Face BERT folder read without torch: config.json checked, and the weights as numpy
float32 arrays from model.safetensors or pytorch_model.bin, each checked against the shape the
config gives it.

pytorch_model.bin is torch's zip format (a pickle and one file per storage). Its pickle is read
by a restricted unpickler that admits what a state dict of tensors names (torch's tensor rebuild
functions, its storage types, OrderedDict) and refuses every other global: a pickle that would
run code names a global (os.system, builtins.eval, ...) and is refused before anything is called.
Every file is opened as a regular file (not a FIFO, a device or a symbolic link)."""

from __future__ import annotations

import collections
import io
import json
import math
import os
import pickle
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..results import open_regular, read_regular

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
HEADER_LIMIT = 100 << 20  # a safetensors header (JSON) larger than this is not a weights file
CONFIG_LIMIT = 1 << 20


class WeightsError(UsageError):
    """A folder whose files are not a BERT econeval can read (one line, exit 2)."""


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    hidden_act: str

    @classmethod
    def read(cls, path: Path) -> "BertConfig":
        try:
            doc = json.loads(read_checked(path, CONFIG_LIMIT))
        except ValueError as exc:
            raise WeightsError(f"{path}: not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise WeightsError(f"{path}: not a JSON object")
        kind = doc.get("model_type", "bert")
        if kind != "bert":
            raise WeightsError(f"{path}: model_type '{kind}': only BERT models (model_type bert) are converted")
        if doc.get("position_embedding_type", "absolute") != "absolute":
            raise WeightsError(f"{path}: position_embedding_type '{doc['position_embedding_type']}': only absolute positions are converted")
        values: dict[str, Any] = {}
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                     "max_position_embeddings", "type_vocab_size"):
            v = doc.get(name, 2 if name == "type_vocab_size" else None)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 1 << 24:
                raise WeightsError(f"{path}: {name} must be a positive integer, not {v!r}")
            values[name] = v
        eps = doc.get("layer_norm_eps", 1e-12)
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < 1:
            raise WeightsError(f"{path}: layer_norm_eps must be a small positive number, not {eps!r}")
        act = doc.get("hidden_act", "gelu")
        if act not in ACTIVATIONS:
            raise WeightsError(f"{path}: hidden_act {act!r} is not one econeval converts ({', '.join(ACTIVATIONS)})")
        if values["hidden_size"] % values["num_attention_heads"]:
            raise WeightsError(f"{path}: hidden_size {values['hidden_size']} is not a multiple of "
                               f"num_attention_heads {values['num_attention_heads']}")
        return cls(layer_norm_eps=float(eps), hidden_act=act, **values)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every weight the encoder uses, by its name in transformers' BertModel, with its shape
        (a Linear's weight is [out, in])."""
        H, I = self.hidden_size, self.intermediate_size
        out: dict[str, tuple[int, ...]] = {
            "embeddings.word_embeddings.weight": (self.vocab_size, H),
            "embeddings.position_embeddings.weight": (self.max_position_embeddings, H),
            "embeddings.token_type_embeddings.weight": (self.type_vocab_size, H),
            "embeddings.LayerNorm.weight": (H,), "embeddings.LayerNorm.bias": (H,)}
        for i in range(self.num_hidden_layers):
            p = f"encoder.layer.{i}."
            for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
                out[p + name + ".weight"], out[p + name + ".bias"] = (H, H), (H,)
            out[p + "intermediate.dense.weight"], out[p + "intermediate.dense.bias"] = (I, H), (I,)
            out[p + "output.dense.weight"], out[p + "output.dense.bias"] = (H, I), (H,)
            for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
                out[p + norm + ".weight"], out[p + norm + ".bias"] = (H,), (H,)
        return out


def _refused(path: Path, exc: OSError) -> WeightsError:
    """One line for a file that is not there or not a regular file, naming what it is."""
    import stat

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return WeightsError(f"{path}: no such file")
    except OSError:
        mode = 0
    for test, what in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device node"),
                       (stat.S_ISBLK, "a device node"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            hint = "a Hugging Face cache snapshot links its files into blobs/: copy the folder with cp -rL" if what == "a symbolic link" else None
            return WeightsError(f"{path} is {what}: only regular files are read", hint=hint)
    return WeightsError(f"{path}: cannot be read ({exc.strerror or exc})")


def read_checked(path: Path, limit: int | None = None) -> bytes:
    """A file of the folder: its bytes, or one line saying why not (not there, not a regular file)."""
    try:
        return read_regular(path, limit)
    except OSError as exc:
        raise _refused(path, exc) from None


def weights_file(folder: Path) -> Path:
    """The folder's weights: model.safetensors, else pytorch_model.bin."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        if os.path.lexists(folder / name):
            return folder / name
    raise WeightsError(f"{folder} holds neither model.safetensors nor pytorch_model.bin")


def read_weights(path: Path, config: BertConfig) -> dict[str, np.ndarray]:
    """The encoder's weights as float32 arrays, by BertModel's names (a `bert.` prefix dropped,
    the pooler and task heads left out), each of the shape the config gives it."""
    raw = _safetensors(path) if path.suffix == ".safetensors" else _torch_zip(path)
    found: dict[str, np.ndarray] = {}
    for name, arr in raw.items():
        name = name.removeprefix("bert.")
        if name.endswith(".gamma") or name.endswith(".beta"):  # checkpoints converted from TensorFlow
            name = name.rsplit(".", 1)[0] + (".weight" if name.endswith(".gamma") else ".bias")
        found[name] = arr
    out = {}
    for name, shape in config.shapes().items():
        if name not in found:
            raise WeightsError(f"{path} lacks {name}: not a BERT encoder of the config's {config.num_hidden_layers} layers")
        arr = found[name]
        if tuple(arr.shape) != shape:
            raise WeightsError(f"{path}: {name} is {list(arr.shape)}, but config.json makes it {list(shape)}",
                               hint="the config.json and the weights are not of one model")
        if arr.dtype.kind != "f":
            raise WeightsError(f"{path}: {name} holds {arr.dtype}, not floating-point numbers")
        arr = arr.astype(np.float32)
        if not np.isfinite(arr).all():
            raise WeightsError(f"{path}: {name} holds values that are not finite")
        out[name] = arr
    return out


# ---- model.safetensors ------------------------------------------------------------------------
SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "bf16", "I64": "<i8", "I32": "<i4", "I16": "<i2",
                      "I8": "i1", "U8": "u1", "BOOL": "?"}


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file: an 8-byte little-endian header length, a JSON header naming each
    tensor's dtype, shape and byte range, then the bytes."""
    data = read_checked(path)
    if len(data) < 8:
        raise WeightsError(f"{path}: too short to be a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(HEADER_LIMIT, len(data) - 8):
        raise WeightsError(f"{path}: not a safetensors file (its header would be {n:,} bytes)")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError:
        raise WeightsError(f"{path}: not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise WeightsError(f"{path}: not a safetensors file (its header is not a JSON object)")
    body = memoryview(data)[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = SAFETENSORS_DTYPES[entry["dtype"]], entry["shape"], entry["data_offsets"]
            ok = all(isinstance(d, int) and d >= 0 for d in [*shape, begin, end])
        except (KeyError, TypeError, ValueError):
            raise WeightsError(f"{path}: tensor {name!r} is described wrongly in the header ({str(entry)[:80]})") from None
        size = 2 if dtype == "bf16" else np.dtype(dtype).itemsize
        if not ok or end - begin != math.prod(shape) * size or end > len(body):
            raise WeightsError(f"{path}: tensor {name!r}'s bytes ({begin}..{end}) do not hold its shape {shape} "
                               f"of {entry['dtype']} within the file")
        out[name] = _array(body[begin:end], dtype, shape)
    return out


def _array(raw, dtype: str, shape) -> np.ndarray:
    if dtype == "bf16":  # numpy has no bfloat16: its 16 bits are a float32's upper half
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


# ---- pytorch_model.bin: torch's zip format, through a restricted unpickler ---------------------
TORCH_STORAGES = {"FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2", "BFloat16Storage": "bf16",
                  "LongStorage": "<i8", "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1", "ByteStorage": "u1",
                  "BoolStorage": "?"}


@dataclass(frozen=True)
class _StorageType:
    """What the pickle's `torch.FloatStorage` (etc.) stands for: a dtype, nothing callable."""

    dtype: str


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any = False, hooks: Any = None,
                    metadata: Any = None) -> np.ndarray:
    """torch._utils._rebuild_tensor_v2: a view of a storage (offset, size, stride in elements),
    checked to lie within it, copied out."""
    if not (isinstance(storage, np.ndarray) and isinstance(offset, int) and isinstance(size, tuple)
            and isinstance(stride, tuple) and len(size) == len(stride)
            and all(isinstance(x, int) and x >= 0 for x in (offset, *size, *stride))):
        raise pickle.UnpicklingError("a tensor described wrongly")
    if math.prod(size) and offset + sum((n - 1) * s for n, s in zip(size, stride)) >= storage.size:
        raise pickle.UnpicklingError("a tensor reaches beyond its storage")
    base = storage[offset:]
    return np.lib.stride_tricks.as_strided(base, shape=size, strides=[s * storage.itemsize for s in stride]).copy()


def _rebuild_parameter(data: Any, requires_grad: Any = False, hooks: Any = None) -> np.ndarray:
    """torch._utils._rebuild_parameter: an nn.Parameter is its tensor here."""
    if not isinstance(data, np.ndarray):
        raise pickle.UnpicklingError("a parameter that is not a tensor")
    return data


ALLOWED = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor, ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
           ("collections", "OrderedDict"): collections.OrderedDict,
           **{("torch", name): _StorageType(dtype) for name, dtype in TORCH_STORAGES.items()}}


class _Refused(Exception):
    pass


class _TensorUnpickler(pickle.Unpickler):
    """Admits the globals of a state dict of tensors (ALLOWED) and the zip's storages; refuses the rest."""

    def __init__(self, data: bytes, storage: Any):
        super().__init__(io.BytesIO(data))
        self.storage = storage

    def find_class(self, module: str, name: str) -> Any:
        found = ALLOWED.get((module, name))
        if found is None:
            raise _Refused(f"{module}.{name}")
        return found

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)
                and isinstance(pid[2], str) and isinstance(pid[4], int) and pid[4] >= 0):
            raise pickle.UnpicklingError(f"a storage reference this reader does not know ({str(pid)[:60]})")
        return self.storage(pid[2], pid[1].dtype, pid[4])


def _torch_zip(path: Path) -> dict[str, np.ndarray]:
    try:
        fd = open_regular(path)
    except OSError as exc:
        raise _refused(path, exc) from None
    with os.fdopen(fd, "rb") as fh:
        if not zipfile.is_zipfile(fh):
            raise WeightsError(f"{path}: not torch's zip format (a file saved by torch before 1.6, or not a torch file)",
                               hint="save it again as model.safetensors (safetensors' convert script, or torch and transformers "
                                    "elsewhere: model.save_pretrained(DIR, safe_serialization=True))")
        try:
            zf = zipfile.ZipFile(fh)
        except zipfile.BadZipFile as exc:
            raise WeightsError(f"{path}: a damaged zip file ({exc})") from None
        with zf:
            # torch stores every member uncompressed: a compressed one (a zip bomb's way to be larger
            # than the file) is refused, so nothing read here is larger than the file itself
            packed = [i.filename for i in zf.infolist() if i.compress_type != zipfile.ZIP_STORED]
            if packed:
                raise WeightsError(f"{path}: {packed[0]} is compressed, which torch never writes: refused")
            pkl = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith("/data.pkl")]
            if len(pkl) != 1:
                raise WeightsError(f"{path}: not torch's zip format (no <name>/data.pkl in it)")
            prefix = pkl[0][: -len("data.pkl")]
            if prefix + "byteorder" in zf.namelist() and zf.read(prefix + "byteorder").strip() != b"little":
                raise WeightsError(f"{path}: a big-endian torch file, which this reader does not read")

            def storage(key: str, dtype: str, numel: int) -> np.ndarray:
                member = prefix + "data/" + key
                size = 2 if dtype == "bf16" else np.dtype(dtype).itemsize
                try:
                    info = zf.getinfo(member)
                except KeyError:
                    raise pickle.UnpicklingError(f"storage {key!r} is not in the file") from None
                if info.file_size != numel * size:
                    raise pickle.UnpicklingError(f"storage {key!r} holds {info.file_size:,} bytes, not {numel:,} × {size}")
                return _array(zf.read(member), dtype, (numel,))

            try:
                state = _TensorUnpickler(zf.read(pkl[0]), storage).load()
            except _Refused as exc:
                raise WeightsError(f"{path}: its pickle names {exc}, which is not part of a tensor: refused "
                                   "(only tensors are read from a pickle; nothing in it was run)") from None
            except WeightsError:
                raise
            except Exception as exc:  # noqa: BLE001 - whatever a damaged pickle raises is one line
                raise WeightsError(f"{path}: its pickle cannot be read as a state dict of tensors ({type(exc).__name__}: {exc})") from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items()):
        raise WeightsError(f"{path}: its pickle is not a state dict (names and tensors)")
    return state
