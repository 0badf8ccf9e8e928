"""Assemble what the GPU check needs on a machine without a package registry or ../shared, into
`.gpu_bundle/` (git-ignored; the device tool carries it): everything tools/gpu_check.sh reads
that the repository's tracked files do not hold.

    wheels/                         cp312 manylinux wheels of what econeval, llama-cpp-python and
                                    gguf import and that machine lacks (orjson, platformdirs,
                                    diskcache, gguf), at the versions installed here
    llama_cpp_python-V-cuda.tar.gz  the llama-cpp-python sdist, trimmed to what a CUDA build with
                                    gpu_check.sh's flags compiles (compiled there)
    econeval-data.tar.gz            the built data package (`econeval data pack`, gzipped): the
                                    built JSONL files are git-ignored and ../shared does not travel;
                                    gpu_check.sh installs it with `econeval data install`
    tokenizer.model.v3              Mistral 7B v0.3's SentencePiece vocabulary (from the PyPI
                                    package mistral-common): the 7B-shaped model's vocabulary
    embedder/                       a tiny random ONNX embedder (tests/tiny_bert.py): the stand-in
                                    for the CFBenchmark generation tasks' similarity stage there (the
                                    91 MB m3e embedder does not travel; those scores are computed back
                                    here from the returned samples with `econeval score`)
    prebuilt/                       with --cuda-wheel WHEEL or --build-cuda DIR only: llama-cpp-python
                                    compiled with CUDA where nvcc is (no GPU needed), its package as a
                                    .tar.xz: installed there in place of the build when it loads and
                                    offloads, which leaves the 9 minutes to measure
    token_counts.json               every task's first-stage prompt tokens (Mistral's vocabulary,
                                    through llama.cpp) and generation budget: the full-suite projection
    bundle.json                     what is here: each file's bytes and sha256, the versions

Checks that the folder is under 60 MiB (the device tool takes 64 MiB with the tracked tree) and
that every package the check imports is either on that machine or carried.

    python tools/gpu_bundle.py [--skip-sdist] [--cuda-wheel WHEEL | --build-cuda DIR]    (GPU_BUNDLE=DIR: another folder)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = Path(os.environ.get("GPU_BUNDLE") or REPO / ".gpu_bundle")
LIMIT_MIB = 60
LLAMA_VERSION = "0.3.36"
MISTRAL_COMMON = "mistral-common==1.13.1"  # its data/ holds Mistral 7B v0.3's tokenizer.model.v3
# what the GPU machine lacks of what the check imports (its image: .library/device/KINDS.md): carried as wheels
CARRY = ["orjson", "platformdirs", "diskcache", "gguf"]
# what that machine has (python3 3.12 with these installed): econeval's, llama-cpp-python's and gguf's
# needs and the sdist's build backend, as far as the check reaches them
GPU_HAS = {"numpy", "onnxruntime", "tokenizers", "click", "rich", "jinja2", "markupsafe", "httpx", "httpcore", "h11", "anyio",
           "idna", "certifi", "pyyaml", "tqdm", "requests", "urllib3", "charset-normalizer", "packaging", "scikit-build-core",
           "pathspec", "cmake", "ninja", "pytest", "sentencepiece", "typing-extensions", "markdown-it-py", "mdurl", "pygments",
           "protobuf", "flatbuffers", "sympy", "coloredlogs", "huggingface-hub", "filelock", "fsspec"}
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "manylinux_2_34_x86_64", "manylinux_2_31_x86_64", "manylinux_2_24_x86_64"]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


# ---- the sdist, trimmed -------------------------------------------------------------------------
# Under vendor/llama.cpp: what a build with gpu_check.sh's flags (LLAMA_BUILD_TESTS/EXAMPLES/TOOLS/
# SERVER off, LLAVA_BUILD off: no tools/mtmd) never reads: the vocabulary files, docs, tests, the
# tools and examples, the Python converters, the web UI, and every ggml backend but the CPU and CUDA
# ones (each is added only when its GGML_<NAME> option is on). Outside it: llama-cpp-python's own
# docs, examples, tests and the git objects of the submodule.
TRIM_LLAMA = {"models", "docs", "benches", "media", "tests", "gguf-py", "examples", "tools", "app", "pocs", "ci", "scripts",
              "skills", "requirements", "conversion", "grammars", ".github", ".devops", ".gemini", ".pi", ".git"}
TRIM_GGML = {"ggml-blas", "ggml-cann", "ggml-et", "ggml-hexagon", "ggml-hip", "ggml-metal", "ggml-musa", "ggml-opencl",
             "ggml-openvino", "ggml-rpc", "ggml-sycl", "ggml-virtgpu", "ggml-vulkan", "ggml-webgpu", "ggml-zdnn", "ggml-zendnn"}
TRIM_TOP = {".git", "docs", "examples", "tests", "docker", "scripts"}


def trimmed_out(parts: list[str]) -> bool:
    """Whether a member (its path split at '/', the sdist's folder first) is left out."""
    rest = parts[1:]
    if rest and rest[0] in TRIM_TOP:
        return True
    if rest[:2] != ["vendor", "llama.cpp"] or len(rest) < 3:
        return False
    sub = rest[2:]
    if sub[0] in TRIM_LLAMA:
        return True
    if len(sub) == 1 and sub[0].endswith(".py"):
        return True  # the converters
    return len(sub) > 2 and sub[:2] == ["ggml", "src"] and sub[2] in TRIM_GGML


def trim_sdist(path: Path, out: Path) -> dict:
    """Write the trimmed sdist `out` from `path`; returns what was left out (files, bytes)."""
    dropped = kept = dropped_bytes = 0
    with tarfile.open(path) as src, tarfile.open(out, "w:gz", compresslevel=9) as dst:
        for m in src.getmembers():
            if trimmed_out(m.name.split("/")):
                dropped += 1
                dropped_bytes += m.size
                continue
            kept += 1
            dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    return {"files_kept": kept, "files_dropped": dropped, "bytes_dropped": dropped_bytes}


def sdist(work: Path) -> dict:
    subprocess.run([*PIP, "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(work),
                    f"llama-cpp-python=={LLAMA_VERSION}"], check=True)
    src = next(work.glob("llama_cpp_python-*.tar.gz"))
    for old in OUT.glob("llama_cpp_python-*.tar.gz"):
        old.unlink()
    out = OUT / f"llama_cpp_python-{LLAMA_VERSION}-cuda.tar.gz"
    info = trim_sdist(src, out)
    return {"file": out.name, "from": src.name, "from_bytes": src.stat().st_size, **info}


# ---- wheels and the requirement check -------------------------------------------------------------
def wheels() -> list[str]:
    """cp312 manylinux wheels of CARRY at the versions installed here."""
    folder = OUT / "wheels"
    shutil.rmtree(folder, ignore_errors=True)
    pins = [f"{name}=={metadata.version(name)}" for name in CARRY]
    plats = [a for p in PLATFORMS for a in ("--platform", p)]
    subprocess.run([*PIP, "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12", "--implementation",
                    "cp", *plats, "-d", str(folder), *pins], check=True)
    return sorted(p.name for p in folder.glob("*.whl"))


def _wheel_requires(whl: Path) -> list[str]:
    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def _pyproject_requires(path: Path) -> list[str]:
    import tomllib

    return tomllib.loads(path.read_text())["project"]["dependencies"]


def missing_requirements(llama_requires: list[str]) -> list[str]:
    """The run-time requirements (Python 3.12 on Linux, no extras) of econeval, llama-cpp-python,
    gguf and the carried wheels that are neither on the GPU machine nor carried."""
    from packaging.requirements import Requirement

    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux", "platform_system": "Linux",
           "os_name": "posix", "platform_machine": "x86_64", "implementation_name": "cpython", "extra": ""}
    carried = {norm(w.name.split("-")[0]) for w in (OUT / "wheels").glob("*.whl")}
    reqs = [*_pyproject_requires(REPO / "pyproject.toml"), *llama_requires]
    for whl in (OUT / "wheels").glob("*.whl"):
        reqs += _wheel_requires(whl)
    out = set()
    for text in reqs:
        r = Requirement(text)
        if r.marker is not None and not r.marker.evaluate(env):
            continue
        name = norm(r.name)
        if name not in GPU_HAS and name not in carried and name not in ("llama-cpp-python", "econeval"):
            out.add(name)
    return sorted(out)


def llama_requires() -> list[str]:
    """llama-cpp-python's run-time requirements (its sdist's pyproject, else the installed metadata)."""
    for src in OUT.glob("llama_cpp_python-*.tar.gz"):
        with tarfile.open(src) as t:
            member = next(m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("/pyproject.toml"))
            fh = t.extractfile(member)
            if fh is not None:
                import tomllib

                return tomllib.loads(fh.read().decode())["project"]["dependencies"]
    return metadata.requires("llama_cpp_python") or []


# ---- the data package, the vocabulary, the stand-in embedder ---------------------------------------
def data_package() -> dict:
    from econeval import data

    with tempfile.TemporaryDirectory() as tmp:
        tar = Path(tmp) / "econeval-data.tar"
        index = data.pack(tar)  # refuses data that is not built or does not match its manifests
        with open(tar, "rb") as src, gzip.open(OUT / "econeval-data.tar.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        return {"file": "econeval-data.tar.gz", "package_version": index["package_version"], "benchmarks": index["benchmarks"],
                "tar_bytes": tar.stat().st_size}


def vocabulary(work: Path) -> dict:
    """tokenizer.model.v3 out of mistral-common's wheel (named so in older releases, and
    mistral_instruct_tokenizer_240323.model.v3 in newer ones)."""
    subprocess.run([*PIP, "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(work), MISTRAL_COMMON], check=True)
    whl = next(work.glob("mistral_common-*.whl"))
    with zipfile.ZipFile(whl) as z:
        names = [n for n in z.namelist() if n.startswith("mistral_common/data/") and n.endswith(".model.v3")]
        name = next((n for n in names if n.endswith("/tokenizer.model.v3")), None) or next(n for n in names if "240323" in n)
        (OUT / "tokenizer.model.v3").write_bytes(z.read(name))
    sys.path.insert(0, str(REPO / "tools"))
    from gpu_model import read_vocab

    voc = read_vocab(OUT / "tokenizer.model.v3")
    if len(voc["tokens"]) != 32768:
        sys.exit(f"gpu_bundle: {name} has {len(voc['tokens'])} pieces, not Mistral 7B v0.3's 32768")
    return {"file": "tokenizer.model.v3", "from": f"{whl.name}:{name}", "pieces": len(voc["tokens"])}


def embedder() -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    from tiny_bert import write_tiny_bert

    shutil.rmtree(OUT / "embedder", ignore_errors=True)
    write_tiny_bert(OUT / "embedder")
    return {"folder": "embedder", "what": "tiny random BERT-style ONNX encoder (tests/tiny_bert.py): a stand-in, its "
                                          "similarities mean nothing"}


def reference_answers(task: str, item: dict) -> list[str] | None:
    """What a model that answers as the reference does would generate for a task's item (the likely
    projection's answer lengths; None: no reference, the budget counts): CFBenchmark's reference
    response, EconLogicQA's gold order, EconNLI's Yes or No (its early stop settles at the first
    word), EconNLI CoT's demonstrations' answers (the reasoning its prompt shows; the mean is taken).
    EconNLI-gen keeps all it generates (its budget); STEER-ME reads log-probabilities only."""
    if task.startswith("cfbenchmark") and item.get("response"):
        return [str(item["response"])]
    if task.startswith("econlogicqa") and item.get("answer"):
        return [" " + str(item["answer"])]
    if task in ("econnli-zero", "econnli-icl") and "label" in item:
        return [" Yes" if str(item["label"]) == "1" else " No"]
    if task == "econnli-cot":
        from econeval.benchmarks.econnli import COT_DEMOS

        return [part.split("\n\n###")[0] for part in COT_DEMOS.split("### Answer:")[1:]]
    return None


def likely_tokens(task: str, item: dict, max_tokens: int, count) -> tuple[int, bool]:
    """A request's likely generated tokens: its reference answer's tokens (`count`), the mean of
    several, and one for the stop, at most its budget; and whether a reference gave it."""
    refs = reference_answers(task, item)
    if not refs:
        return max_tokens, False
    return min(max_tokens, round(sum(count(r) for r in refs) / len(refs)) + 1), True


def token_counts() -> dict:
    """Per task: items, first-stage prompt tokens (Mistral 7B v0.3's vocabulary, through llama.cpp's
    tokenizer on a tiny model of that vocabulary), the sum of every first-stage request's
    max_tokens (an upper bound on what a model that never stops early generates), and the likely
    generated tokens (`likely_tokens`: the reference answers' lengths)."""
    import llama_cpp
    from llama_cpp import _internals

    sys.path.insert(0, str(REPO / "tools"))
    from gpu_model import TINY, write_model

    from econeval import api, context, registry

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vocab.gguf"
        write_model(path, OUT / "tokenizer.model.v3", TINY)
        mp = llama_cpp.llama_model_default_params()
        mp.vocab_only = True
        model = _internals.LlamaModel(path_model=str(path), params=mp, verbose=False)

        def count(text: str) -> int:
            return len(model.tokenize(text.encode(), add_bos=False, special=False))

        out: dict = {"tokenizer": "Mistral 7B v0.3 (tokenizer.model.v3, llama.cpp's SentencePiece tokenizer)", "tasks": {}}
        for name in registry.suites()["all"]:  # a tool's task (auto-STEER's) needs its command's input: in no suite
            task = registry.get_task(name)
            rows = api.export_prompts(name)
            items = {it["id"]: it for it in context.RunContext(seed=0, seed_given=False, task_options={}).prepare(task).items}
            prompt = sum(len(model.tokenize(p.encode(), add_bos=True, special=False)) for r in rows for p in r["prompts"].values())
            gen = sum(req.get("max_tokens") or 0 for r in rows for req in r["requests"].values())
            likely = [likely_tokens(name, items.get(r["id"], {}), req["max_tokens"], count)
                      for r in rows for req in r["requests"].values() if req.get("max_tokens")]
            out["tasks"][name] = {"items": len(rows), "prompt_tokens": prompt, "max_generated_tokens": gen,
                                  "likely_generated_tokens": sum(n for n, _ in likely),
                                  "likely_from": f"{sum(ref for _, ref in likely)} of {len(likely)} requests their reference "
                                                 "answer's tokens and a stop (the others their budget)",
                                  "stages": task.stages,
                                  "counted": "the first stage's requests (a later stage — a judge, the answer after CoT "
                                             "reasoning, the embedder — is not counted)"}
        model.close()
    return out


CUBLAS = "nvidia-cublas>=13.0,<13.1"  # CUDA 13.0's cuBLAS, as the GPU machine's driver (580, CUDA 13.0) serves


def build_cuda_wheel(dest: Path) -> Path:
    """Compile the trimmed sdist with CUDA here, where nvcc is and no GPU need be: the GPU check's own
    flags (tools/gpu_check.py) with the flash-attention kernels, cuBLAS from NVIDIA's wheel (pip),
    VMM off where no driver library is here. 25-30 min on 2 cores; the GPU machine then loads it."""
    sys.path.insert(0, str(REPO / "tools"))
    from gpu_check import COMMON_CMAKE, CUDA_CMAKE, FA_ON, cuda_hints, find_nvcc

    nvcc = find_nvcc()
    if not nvcc:
        sys.exit("gpu_bundle: --build-cuda needs nvcc (the CUDA toolkit) here")
    src = sorted(OUT.glob("llama_cpp_python-*-cuda.tar.gz"))
    if not src:
        sys.exit("gpu_bundle: no trimmed sdist in the bundle to build (run without --skip-sdist first)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*PIP, "download", "-q", "--no-deps", "--only-binary=:all:", "-d", tmp, CUBLAS], check=True)
        site = Path(tmp) / "site"
        with zipfile.ZipFile(next(Path(tmp).glob("nvidia_cublas-*.whl"))) as z:
            z.extractall(site)
        args, _ = cuda_hints(nvcc, site_roots=[site])
        env = {**os.environ, "CMAKE_ARGS": " ".join(CUDA_CMAKE + FA_ON + COMMON_CMAKE + args), "CUDACXX": nvcc,
               "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1), "LIBRARY_PATH": str(site / "nvidia" / "cu13" / "lib")}
        print(f"gpu_bundle: compiling {src[-1].name} with CUDA: CMAKE_ARGS={env['CMAKE_ARGS']}", flush=True)
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run([*PIP, "wheel", "-v", "--no-deps", "-w", str(dest), str(src[-1])], check=True, env=env)  # -v: ninja's progress
    return max(dest.glob("llama_cpp_python-*.whl"), key=lambda p: p.stat().st_mtime)


def prebuilt(wheel: Path) -> dict:
    """The CUDA wheel as prebuilt/llama_cpp_python-V-cuda.tar.xz (the folder holds it alone): its
    package and dist-info, each library once (the wheel holds every soname as a copy: six of a
    418 MB libggml-cuda.so) with its other names as links, xz-compressed (a 30 MB archive)."""
    folder = OUT / "prebuilt"
    shutil.rmtree(folder, ignore_errors=True)
    if not wheel.is_file():
        sys.exit(f"gpu_bundle: no wheel {wheel}")
    version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as z:
        members = [i for i in z.infolist() if not i.is_dir() and (i.filename.startswith("llama_cpp/") or ".dist-info/" in i.filename)]
        libs = {Path(i.filename).name: i.file_size for i in members if "/lib/" in i.filename and ".so" in i.filename}
        if not any(n.startswith("libggml-cuda.so") for n in libs):
            sys.exit(f"gpu_bundle: {wheel.name} holds no libggml-cuda.so: not a CUDA build")
        folder.mkdir(parents=True)
        out = folder / f"llama_cpp_python-{version}-cuda.tar.xz"
        with tempfile.TemporaryDirectory() as tmp:
            tar = Path(tmp) / "prebuilt.tar"
            first: dict[tuple[str, int, int], str] = {}  # (folder, size, crc) → the name written
            with tarfile.open(tar, "w") as t:
                for i in sorted(members, key=lambda i: (-len(i.filename), i.filename)):  # the longest soname holds the bytes
                    key = (str(Path(i.filename).parent), i.file_size, i.CRC)
                    info = tarfile.TarInfo(i.filename)
                    if key in first and i.file_size > 0:
                        info.type, info.linkname = tarfile.SYMTYPE, Path(first[key]).name
                        t.addfile(info)
                        continue
                    first[key] = i.filename
                    info.size, info.mode = i.file_size, 0o755 if ".so" in i.filename else 0o644
                    with z.open(i) as fh:
                        t.addfile(info, fh)
            if shutil.which("xz"):  # every core; Python's lzma takes one
                with open(out, "wb") as fh:
                    subprocess.run(["xz", "-T0", "-6", "-c", str(tar)], stdout=fh, check=True)
            else:
                import lzma

                with open(tar, "rb") as src, lzma.open(out, "wb", preset=6) as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
    cuda = max(v for n, v in libs.items() if n.startswith("libggml-cuda.so"))
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(wheel.stat().st_mtime))
    return {"file": f"prebuilt/{out.name}", "from": wheel.name, "built": built, "lib_mib": round(cuda / 2**20, 1),
            "mib": round(out.stat().st_size / 2**20, 1), "libs": sorted(libs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-sdist", action="store_true", help="keep the sdist already in the folder (or carry none)")
    ap.add_argument("--cuda-wheel", type=Path, help="carry this CUDA build of llama-cpp-python (docs/speed-and-gpu.md)")
    ap.add_argument("--build-cuda", type=Path, metavar="DIR",
                    help="compile the CUDA wheel here into DIR (nvcc, no GPU needed; 25-30 min on 2 cores), then carry it")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    doc: dict = {"made": time.strftime("%Y-%m-%d %H:%M:%S"), "by": "tools/gpu_bundle.py"}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not args.skip_sdist:
            doc["sdist"] = sdist(work)
        doc["wheels"] = wheels()
        doc["data"] = data_package()
        doc["vocabulary"] = vocabulary(work)
    doc["embedder"] = embedder()
    if args.build_cuda:
        args.cuda_wheel = build_cuda_wheel(args.build_cuda)
    if args.cuda_wheel:
        doc["prebuilt"] = prebuilt(args.cuda_wheel)
    else:
        shutil.rmtree(OUT / "prebuilt", ignore_errors=True)
    (OUT / "token_counts.json").write_text(json.dumps(token_counts(), indent=1))
    missing = missing_requirements(llama_requires())
    if missing:
        sys.exit(f"gpu_bundle: the GPU machine lacks {', '.join(missing)} and no wheel of it is carried (add it to CARRY)")
    doc["requirements"] = "every run-time requirement of econeval, llama-cpp-python, gguf and the carried wheels is on the " \
                          "GPU machine or carried"
    files = sorted(p for p in OUT.rglob("*") if p.is_file() and p.name != "bundle.json")
    from econeval.data import sha256_file

    doc["files"] = {str(p.relative_to(OUT)): {"bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in files}
    size = sum(p.stat().st_size for p in files)
    doc["total_mib"] = round(size / 2**20, 1)
    doc["seconds"] = round(time.monotonic() - t0, 1)
    (OUT / "bundle.json").write_text(json.dumps(doc, indent=1))
    print(f"gpu_bundle: {OUT} holds {size / 2**20:.1f} MiB (limit {LIMIT_MIB} MiB) in {doc['seconds']} s")
    if size > LIMIT_MIB * 2**20:
        sys.exit(f"gpu_bundle: {size / 2**20:.1f} MiB is over the {LIMIT_MIB} MiB limit")


if __name__ == "__main__":
    main()
