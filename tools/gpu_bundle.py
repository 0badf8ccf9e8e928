"""Assemble what the GPU check needs on a machine without a package registry, into `.gpu_bundle/`
(git-ignored): the llama-cpp-python sdist (compiled there with CUDA), cp312 manylinux wheels of
econeval's run-time dependencies that machine lacks and of the sdist's build backend, econeval
itself as a wheel, and `token_counts.json` (every task's prompt tokens, counted with the default
model's tokenizer, and its generation budget) for the full-suite projection. Checks the folder
is under 60 MiB.

    python tools/gpu_bundle.py [--counts-only]      (GPU_BUNDLE=DIR: another folder)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("GPU_BUNDLE") or REPO / ".gpu_bundle")
LIMIT_MIB = 60
LLAMA = "llama-cpp-python==0.3.36"
# what the GPU machine lacks (it has numpy and onnxruntime): econeval's run-time needs, the sdist's
# run-time and build needs, and gguf (writes the 7B-shaped model) with its imports
WHEELS = ["orjson", "platformdirs", "click", "httpx", "httpcore", "h11", "anyio", "sniffio", "idna", "certifi",
          "tokenizers", "typing-extensions", "diskcache", "jinja2", "markupsafe", "scikit-build-core", "pathspec",
          "packaging", "gguf", "pyyaml", "tqdm", "requests", "urllib3", "charset-normalizer"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "manylinux_2_34_x86_64", "manylinux_2_31_x86_64", "manylinux_2_24_x86_64"]


def token_counts() -> dict:
    """Per task: items, first-stage prompt tokens (the default model's tokenizer) and the sum of
    every stage's max_tokens (an upper bound on what a model that never stops early generates)."""
    import llama_cpp
    from llama_cpp import _internals

    from econeval import api, registry, roles
    from econeval.backends.llamacpp import model_path

    path = model_path(roles.resolve(None))
    mp = llama_cpp.llama_model_default_params()
    mp.vocab_only = True
    model = _internals.LlamaModel(path_model=str(path), params=mp, verbose=False)
    out = {"tokenizer": f"{path.name} (the default model's)", "tasks": {}}
    for name, task in registry.tasks().items():
        rows = api.export_prompts(name)
        prompt = sum(len(model.tokenize(p.encode(), add_bos=True, special=False)) for r in rows for p in r["prompts"].values())
        gen = sum(req.get("max_tokens") or 0 for r in rows for req in r["requests"].values())
        out["tasks"][name] = {"items": len(rows), "prompt_tokens": prompt, "max_generated_tokens": gen, "stages": task.stages,
                              "counted": "the first stage's requests (a later stage — a judge, the answer after CoT "
                                         "reasoning, the embedder — is not counted)"}
    return out


TRIM = ("models", "docs", "benches", "media", "tests", "gguf-py", "examples")  # not needed to build the library


def trim_sdist(path: Path) -> Path:
    """The sdist without llama.cpp's vocabulary files, docs, benches and tests (built with
    LLAMA_BUILD_TESTS/EXAMPLES off): 74 MB → under the transfer limit."""
    import tarfile

    out = path.with_name(path.name.replace(".tar.gz", "-trimmed.tar.gz"))
    with tarfile.open(path) as src, tarfile.open(out, "w:gz") as dst:
        for m in src.getmembers():
            parts = m.name.split("/")
            if len(parts) > 3 and parts[1:3] == ["vendor", "llama.cpp"] and parts[3] in TRIM:
                continue
            dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    path.unlink()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts-only", action="store_true", help="write token_counts.json only (no downloads)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "token_counts.json").write_text(json.dumps(token_counts(), indent=1))
    if not args.counts_only:
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
        plats = [a for p in PLATFORMS for a in ("--platform", p)]
        for old in OUT.glob("llama_cpp_python-*.tar.gz"):
            old.unlink()
        subprocess.run([*pip, "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(OUT), LLAMA], check=True)
        trim_sdist(next(OUT.glob("llama_cpp_python-*.tar.gz")))
        subprocess.run([*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                        "--implementation", "cp", *plats, "-d", str(OUT / "wheels"), *WHEELS], check=True)
        subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(OUT / "wheels"), str(REPO)], check=True)
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"gpu_bundle: {OUT} holds {size / 2**20:.1f} MiB (limit {LIMIT_MIB} MiB)")
    if size > LIMIT_MIB * 2**20:
        sys.exit(f"gpu_bundle: {size / 2**20:.1f} MiB is over the {LIMIT_MIB} MiB limit")


if __name__ == "__main__":
    main()
