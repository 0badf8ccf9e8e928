"""The GPU check (tools/gpu_check.sh runs it; docs/speed-and-gpu.md "GPU"): on a bare GPU machine
without a package registry, from the repository's tracked files and `.gpu_bundle/` alone, within
one command of at most 9 minutes.

    python tools/gpu_check.py all OUT_DIR [--dry-run] [--limit-s 540]

Steps (each recorded in OUT_DIR/gpu_check.json, which is written before the first and rewritten
after every one, so that a command stopped at its limit still returns what was measured):

1. env      the device, nvcc, CPUs, disk; the bundle's manifest
2. install  the carried wheels (--target, no index)
3. build    llama-cpp-python's sdist compiled with CUDA for sm_90 only, on every core, timed, in
            the background (its log: OUT_DIR/build.log); cuBLAS and the driver library are looked
            for in the toolkit and in python3's nvidia wheels
4. data     the carried data package installed (`econeval data install`, then `data verify`)
5. model    a random-weight Mistral-7B-v0.3-shaped Q4_K_M GGUF with Mistral's real vocabulary
            (tools/gpu_model.py), written while llama.cpp compiles
6. smoke    the CUDA build loads the model with every layer offloaded and decodes; llama.cpp's
            tokenization of the vocabulary against SentencePiece's own
7. econeval every task with the product's defaults (`--limit 16`, a chunk deadline): run.json's
            backend section, each task's tokens/s, errors; the CFBenchmark samples come back
            without the stand-in embedder's similarities, to be scored here (`econeval score`)
8. configs  one workload (CFBenchmark few-shot and EconNLI CoT requests, generation capped) under
            each configuration in turn (`CONFIGS`: KV layout unified / streams, --parallel 64 / 128 /
            255, n_ubatch 2048), then in a process of its own with GGML_CUDA_FORCE_CUBLAS=1 (cuBLAS
            in place of llama.cpp's MMQ kernels): each one's seconds, counters, and its answers
            against the first's
9. engine   llama.cpp's own batched greedy decode at 1, 8, 32 and 64 sequences
10. bench   tools/bench.py sections 1 and 2 with offload, when time is left

The full suite's projection (`project`): each task's measured seconds scaled to its full set, at
every request's budget (an upper bound: a random-weight model never stops early) and, likely, at
the reference answers' lengths (token_counts.json's `likely_generated_tokens`), a generated token
weighed as llama.cpp's batched prompt and generation rates at the run's --parallel say.

A time guard ends the command within its limit whatever happens: each step runs in its own
process with a timeout, the build is stopped when too little time is left to measure, the
measuring steps are shortened or skipped (gpu_check.json says which and why). At most 8 files
come back in OUT_DIR: gpu_check.json, gpu_check.log, build.log, run.json, results*.json,
cfbenchmark-samples.jsonl.

`--dry-run` (here, tests/test_gpu_check.py): tiny layers with the same real vocabulary, the CPU
build already installed, the wheels installed as cp312 into a throwaway folder, and the trimmed
sdist configured (not compiled) by CMake without CUDA: every step but the CUDA ones.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO))

LIMIT_S = 540  # the 9 minutes for the whole command
MARGIN_S = 25  # left at the end for the last write and the shell
MEASURE_MIN_S = 110  # the build is stopped when less than this would be left to measure
# the measuring steps' shares of the time (each also bounded by what is left): econeval's chunk starts,
# the configurations, the configurations under cuBLAS, the engine's own rates
RUN_S, CONFIGS_S, CUBLAS_S, ENGINE_S = 150.0, 120.0, 60.0, 75.0
# the configurations the `configs` step times, the product's GPU default first: (name, backend options)
CONFIGS = [("streams-64", {"kv_layout": "streams", "parallel": 64}),
           ("unified-64", {"kv_layout": "unified", "parallel": 64}),
           ("streams-64-ubatch2048", {"kv_layout": "streams", "parallel": 64, "n_ubatch": 2048}),
           ("streams-128", {"kv_layout": "streams", "parallel": 128}),
           ("streams-255", {"kv_layout": "streams", "parallel": 255}),  # llama.cpp's 256 sequences with the keeper
           ("unified-64-ubatch2048", {"kv_layout": "unified", "parallel": 64, "n_ubatch": 2048})]
CUBLAS_CONFIGS = [("streams-64", CONFIGS[0][1]), ("unified-64", CONFIGS[1][1])]  # under GGML_CUDA_FORCE_CUBLAS=1
DRY_CONFIGS = [("streams-2", {"kv_layout": "streams", "parallel": 2}), ("unified-2", {"kv_layout": "unified", "parallel": 2})]
# the configurations' workload: task → (items, CFBenchmark's per sub-task; generation capped at)
CONFIG_WORK = {"cfbenchmark-few": (8, 32), "econnli-cot": (64, 64)}
DRY_WORK = {"econnli-cot": (2, 4)}  # CFBenchmark's few-shot prompts take minutes on a CPU
CUDA_CMAKE = ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90", "-DGGML_CUDA_COMPRESSION_MODE=none", "-DGGML_CUDA_NCCL=OFF"]
# The flash-attention kernels are 34 of the 141 CUDA files and 45% of their compile time (measured
# here, one core each: a fattn-mma instance 90 s, a fattn-tile one 60 s; a mmq instance 67 s): off
# unless GPU_CHECK_FA=on, so that the build leaves time to measure within the 9 minutes. With them,
# only the F16 K/V vector kernels (econeval's KV cache is F16).
FA_ON = ["-DGGML_CUDA_FA=ON", "-DGGML_CUDA_FA_QUANTS=f16-f16"]
FA_OFF = ["-DGGML_CUDA_FA=OFF"]
# what llama-cpp-python needs and nothing else: no tests, examples, tools, server, mtmd (LLAVA_BUILD);
# the CPU part portable AVX2 as tools/bootstrap.sh builds it
COMMON_CMAKE = ["-DLLAVA_BUILD=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
                "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_OPENSSL=OFF", "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON",
                "-DGGML_FMA=ON", "-DGGML_F16C=ON"]
RETURNED = ("gpu_check.json", "gpu_check.log", "build.log", "run.json", "results.json", "cfbenchmark-samples.jsonl")
MAX_FILES = 8
# Mistral 7B v0.3's SentencePiece ids of two texts (sentencepiece 0.2 on tokenizer.model.v3, BOS first)
TOKENS = {"The central bank raised interest rates.": [1, 1183, 6739, 5974, 7101, 2913, 8746, 29491],
          "Premise: 经济增长放缓\nHypothesis:  two  spaces": [1, 8577, 1632, 29515, 29473, 30232, 32412, 30428, 30263, 30209,
                                                              30611, 781, 29537, 2184, 7085, 1046, 29515, 29473, 1757, 29473, 11367]}


class StepFailed(Exception):
    def __init__(self, msg: str, timed_out: bool = False):
        super().__init__(msg)
        self.timed_out = timed_out


def write_json(path: Path, doc) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    os.replace(tmp, path)


def kill_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM to the process group (econeval then marks its run interrupted and ends), SIGKILL
    after `grace` seconds."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


class GpuMemory:
    """Peak GPU memory in use (nvidia-smi polled every 0.5 s); None without nvidia-smi."""

    def __init__(self):
        self.peak_mib: int | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self.stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout
                used = max(int(x) for x in out.split())
                self.peak_mib = max(self.peak_mib or 0, used)
            except (OSError, ValueError, subprocess.SubprocessError):
                return
            self.stop.wait(0.5)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()


# ---- the driver --------------------------------------------------------------------------------
class Check:
    def __init__(self, out: Path, dry: bool, limit_s: float, t0: float):
        self.out, self.dry, self.t0 = out, dry, t0
        self.deadline = t0 + limit_s - MARGIN_S
        self.bundle = Path(os.environ.get("GPU_BUNDLE") or REPO / ".gpu_bundle").resolve()
        self.work = Path(os.environ.get("GPU_CHECK_WORK") or Path(tempfile.gettempdir()) / "econeval-gpu-check").resolve()
        if self.work.exists():  # a folder of an earlier check only (its marker), never anything else
            if not (self.work / ".econeval-gpu-check").is_file():
                sys.exit(f"gpu_check: {self.work} exists and is not a GPU check's work folder (GPU_CHECK_WORK)")
            shutil.rmtree(self.work)
        (self.work / "steps").mkdir(parents=True)
        (self.work / ".econeval-gpu-check").write_text("tools/gpu_check.py's work folder: removed by the next check\n")
        self.site, self.site_llama = self.work / "site", self.work / "site-llama"
        self.model = self.work / "model.gguf"
        self.py = sys.executable
        self.ld_path: list[str] = []
        self.doc: dict = {"status": "running", "dry_run": dry, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "limit_s": limit_s,
                          "elapsed_s": 0.0, "repo": str(REPO), "bundle": str(self.bundle), "steps": {}, "skipped": {}}
        self.save()

    def elapsed(self) -> float:
        return round(time.time() - self.t0, 1)

    def left(self) -> float:
        return self.deadline - time.time()

    def save(self) -> None:
        self.doc["elapsed_s"] = self.elapsed()
        write_json(self.out / "gpu_check.json", self.doc)

    def say(self, msg: str) -> None:
        print(f"gpu_check [{self.elapsed():6.1f} s] {msg}", flush=True)

    def env(self, **extra) -> dict:
        """The environment of the econeval steps: the carried packages and the repository first on
        the path, econeval's folders inside the work folder (an empty cache, no user config)."""
        env = {k: v for k, v in os.environ.items() if k not in ("ECONEVAL_MODELS", "ECONEVAL_DATA_DIR", "ECONEVAL_PLUGINS")}
        path = [str(REPO)] if self.dry else [str(self.site_llama), str(self.site), str(REPO)]
        env.update(PYTHONPATH=os.pathsep.join(path + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]),
                   ECONEVAL_HOME=str(self.work / "home"), ECONEVAL_CACHE=str(self.work / "cache"),
                   XDG_CONFIG_HOME=str(self.work / "config"), GPU_BUNDLE=str(self.bundle), GPU_CHECK_WORK=str(self.work),
                   PYTHONUNBUFFERED="1")
        if self.ld_path:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(self.ld_path + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
        env.update(extra)
        return env

    def run(self, cmd: list[str], timeout: float, env: dict | None = None, log: Path | None = None, name: str = "cmd",
            grace: float = 5.0) -> str:
        """A command in its own process group, killed with its children at `timeout`. Its output
        goes to `log`, else to the step's log, copied into gpu_check.log when it ends; returns the
        last 4,000 characters."""
        if timeout <= 1:
            raise StepFailed("no time left")
        own = log is None
        logfile = log or self.work / "steps" / f"{name}.log"
        with open(logfile, "ab") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env or self.env(), cwd=REPO, start_new_session=True)
            mark = self.mark(proc, name)
            try:
                rc: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_group(proc, grace)
                rc = None
            mark.unlink(missing_ok=True)
        text = logfile.read_bytes().decode(errors="replace")
        if own:
            sys.stdout.write(text[-200_000:])
            sys.stdout.flush()
        if rc is None:
            raise StepFailed(f"stopped at its time limit ({timeout:.0f} s): {text[-1500:]}", timed_out=True)
        if rc != 0:
            raise StepFailed(f"exit status {rc}: {text[-1500:]}")
        return text[-4000:]

    def mark(self, proc: subprocess.Popen, name: str) -> Path:
        """Its process group's id in the work folder while it runs: gpu_check.sh ends any group still
        there when the driver itself was stopped (each runs in a session of its own)."""
        path = self.work / "steps" / f"{name}.pgid"
        path.write_text(str(proc.pid))
        return path

    def step(self, name: str, fn, need_s: float = 5.0) -> dict | None:
        """Run one step if at least `need_s` seconds are left; record its outcome and time."""
        if self.left() < need_s:
            self.skip(name, f"{max(0, self.left()):.0f} s left of the time limit, the step needs {need_s:.0f} s")
            return None
        rec: dict = {"status": "running", "started_s": self.elapsed()}
        self.doc["steps"][name] = rec
        self.save()
        self.say(f"{name} …")
        t0 = time.time()
        try:
            result = fn()
            rec.update(status="ok", **({"result": result} if result is not None else {}))
        except StepFailed as exc:
            rec.update(status="failed", error=str(exc)[-3000:])
            result = None
        except Exception as exc:  # a step's own bug must not cost the rest of the check
            rec.update(status="failed", error=f"{type(exc).__name__}: {exc}"[-3000:])
            result = None
        rec["seconds"] = round(time.time() - t0, 1)
        self.say(f"{name}: {rec['status']} in {rec['seconds']} s" + (f": {rec['error'][:300]}" if "error" in rec else ""))
        self.save()
        return result if rec["status"] == "ok" else None

    def skip(self, name: str, why: str) -> None:
        self.doc["skipped"][name] = why
        self.say(f"{name}: skipped: {why}")
        self.save()

    def sub_step(self, name: str, timeout: float, *args: str, grace: float = 5.0, env: dict | None = None) -> dict:
        """A measuring step in its own process (`gpu_check.py step NAME`): its result JSON, also when
        it was stopped at its time limit and wrote one in its `grace` seconds (econeval does).
        `env`: more of its environment."""
        result = self.work / "steps" / f"{name}.json"
        cmd = [self.py, str(REPO / "tools" / "gpu_check.py"), "step", name, str(self.out), *(["--dry-run"] if self.dry else []), *args]
        try:
            self.run(cmd, timeout - grace, env=self.env(GPU_CHECK_DEADLINE=str(time.time() + timeout - grace), **(env or {})),
                     name=name, grace=grace)
        except StepFailed as exc:
            if not result.is_file():
                raise
            if exc.timed_out:
                return {**json.loads(result.read_text()), "stopped_at_time_limit": True}
            # a step that wrote part of its result and then died (a CUDA error ends the process): that part and why
            return {**json.loads(result.read_text()), "stopped_by": str(exc)[:2000]}
        if not result.is_file():
            raise StepFailed(f"the step wrote no {result.name}")
        return json.loads(result.read_text())

    # ---- the steps -----------------------------------------------------------------------------
    def s_env(self) -> dict:
        def out(cmd):
            try:
                return subprocess.run(cmd, capture_output=True, text=True, timeout=15).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                return None

        nvcc = find_nvcc()
        info = {"python": sys.version.split()[0], "executable": sys.executable, "nproc": os.cpu_count(),
                "disk_free_gib": round(shutil.disk_usage(self.work).free / 2**30, 1),
                "gpu": out(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,memory.used", "--format=csv,noheader"]),
                "nvcc": nvcc, "nvcc_version": (out([nvcc, "--version"]) or "").splitlines()[-1:] if nvcc else None}
        manifest = self.bundle / "bundle.json"
        if not manifest.is_file():
            raise StepFailed(f"no {manifest}: make the bundle with tools/gpu_bundle.py where pip works, and carry it")
        b = json.loads(manifest.read_text())
        info["bundle"] = {k: b.get(k) for k in ("made", "total_mib", "wheels", "sdist", "data", "vocabulary")}
        return info

    def s_install(self) -> dict:
        wheels = sorted(glob.glob(str(self.bundle / "wheels" / "*.whl")))
        if not wheels:
            raise StepFailed(f"no wheels in {self.bundle}/wheels")
        cmd = [self.py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--no-deps", "--no-compile"]
        if self.dry:  # this Python is not 3.12: prove that the set installs as cp312 manylinux, into a throwaway folder
            target = self.work / "site-cp312"
            cmd += ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
                    "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64"]
        else:
            target = self.site
        self.run([*cmd, "--target", str(target), *wheels], timeout=min(90, self.left()), env=dict(os.environ), name="install")
        return {"wheels": [Path(w).name for w in wheels], "target": str(target),
                "installed": sorted(p.name for p in target.iterdir() if p.name.endswith(".dist-info"))}

    def prebuilt(self) -> Path | None:
        """The carried CUDA build of llama-cpp-python, compiled where nvcc is (tools/gpu_bundle.py
        --build-cuda or --cuda-wheel: its package as a .tar.xz); None: the sdist is compiled here."""
        found = sorted((self.bundle / "prebuilt").glob("llama_cpp_python-*-cuda.tar.xz"))
        return found[-1] if found else None

    def install_prebuilt(self) -> dict:
        """The carried CUDA build unpacked into site-llama; the CUDA libraries it links (cuBLAS, the
        runtime) from the toolkit or python3's NVIDIA wheels, as for the build; then it must load and
        offload."""
        archive = self.prebuilt()
        assert archive is not None
        nvcc = find_nvcc()
        hints = cuda_hints(nvcc)[1] if nvcc else {"ld_library_path": [], "toolkit": "no nvcc: none found"}
        self.ld_path = list(hints["ld_library_path"])
        t0 = time.time()
        with tarfile.open(archive) as t:
            t.extractall(self.site_llama, filter="data")  # links stay inside the folder
        probe = ("import llama_cpp, sys; print(llama_cpp.llama_print_system_info().decode()); "
                 "sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 3)")
        try:
            info = self.run([self.py, "-c", probe], timeout=min(60, self.left()), name="prebuilt-probe")
        except StepFailed as exc:
            shutil.rmtree(self.site_llama, ignore_errors=True)
            raise StepFailed(f"the carried build {archive.name} does not load or offload here: {exc}") from None
        made = json.loads((self.bundle / "bundle.json").read_text()).get("prebuilt") or {}
        return {"prebuilt": archive.name, "from": made.get("from"), "install_s": round(time.time() - t0, 1),
                "system_info": info.strip().splitlines()[-1:],
                "built": made.get("built"), "lib_mib": made.get("lib_mib"), **hints}

    def sdist(self) -> Path:
        found = sorted(self.bundle.glob("llama_cpp_python-*-cuda.tar.gz"))
        if not found:
            raise StepFailed(f"no llama_cpp_python-*-cuda.tar.gz in {self.bundle}")
        return found[-1]

    def start_build(self) -> dict:
        """pip compiles the sdist with CUDA into site-llama, in the background (waited for later)."""
        sdist = self.sdist()
        nvcc = find_nvcc()
        if not nvcc:
            raise StepFailed("no nvcc on PATH or in /usr/local/cuda*/bin")
        args, hints = cuda_hints(nvcc)
        self.ld_path = list(hints["ld_library_path"])
        env = dict(os.environ)
        fa = os.environ.get("GPU_CHECK_FA", "off").lower() in ("1", "on", "true", "yes")
        env.update(CMAKE_ARGS=" ".join(CUDA_CMAKE + (FA_ON if fa else FA_OFF) + COMMON_CMAKE + args),
                   CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 1),
                   CUDACXX=nvcc, PATH=os.pathsep.join([str(Path(nvcc).parent), env.get("PATH", "")]))
        if self.ld_path:
            env["LIBRARY_PATH"] = os.pathsep.join(self.ld_path + [p for p in env.get("LIBRARY_PATH", "").split(os.pathsep) if p])
        # the build folder kept (ninja's log: each file's compile time)
        cmd = [self.py, "-m", "pip", "install", "-v", "--disable-pip-version-check", "--no-index", "--no-deps",
               "--no-build-isolation", "--no-compile", "--config-settings", f"build-dir={self.work / 'skbuild'}",
               "--target", str(self.site_llama), str(sdist)]
        self.build_log = open(self.out / "build.log", "ab")
        self.build_log.write(f"CMAKE_ARGS={env['CMAKE_ARGS']}\n{' '.join(cmd)}\n".encode())
        self.build_log.flush()
        self.build_t0 = time.time()
        self.build = subprocess.Popen(cmd, stdout=self.build_log, stderr=subprocess.STDOUT, env=env, cwd=self.work,
                                      start_new_session=True)
        self.build_mark = self.mark(self.build, "build")
        return {"sdist": sdist.name, "cmake_args": env["CMAKE_ARGS"], "parallel": env["CMAKE_BUILD_PARALLEL_LEVEL"], "nvcc": nvcc,
                "flash_attention_kernels": fa, **hints}

    def wait_build(self) -> dict:
        rec = self.doc["steps"]["build"]
        while True:
            try:
                rc = self.build.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                rec["progress"] = build_progress(self.out / "build.log")
                rec["seconds"] = round(time.time() - self.build_t0, 1)
                self.save()
                if self.left() < MEASURE_MIN_S:
                    kill_group(self.build)
                    self.build_mark.unlink(missing_ok=True)
                    self.build_log.close()
                    raise StepFailed(f"stopped after {time.time() - self.build_t0:.0f} s at {rec['progress']}: less than "
                                     f"{MEASURE_MIN_S} s would be left to measure") from None
        self.build_mark.unlink(missing_ok=True)
        self.build_log.close()
        secs = round(time.time() - self.build_t0, 1)
        if rc != 0:
            raise StepFailed(f"pip exit status {rc} after {secs} s: " + (self.out / "build.log").read_bytes()[-1500:].decode(errors="replace"))
        libs = sorted(p.name for p in (self.site_llama / "llama_cpp" / "lib").glob("*.so*"))
        cuda_lib = next((p for p in (self.site_llama / "llama_cpp" / "lib").glob("libggml-cuda.so*")), None)
        return {"build_s": secs, "progress": build_progress(self.out / "build.log"), "libs": libs,
                "libggml_cuda_mib": round(cuda_lib.stat().st_size / 2**20, 1) if cuda_lib else None,
                "compile_times": ninja_times(self.work / "skbuild" / ".ninja_log")}

    def configure(self) -> dict:
        """The dry run's stand-in for the build: CMake configures the trimmed sdist (CPU, the same
        options otherwise): every folder the build reads is there."""
        if not shutil.which("cmake"):
            raise StepFailed("no cmake here")
        src = self.work / "sdist"
        src.mkdir()
        shutil.unpack_archive(str(self.sdist()), str(src))
        top = next(src.iterdir())
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        self.run(["cmake", "-S", str(top), "-B", str(self.work / "cmake-cpu"), *gen, *COMMON_CMAKE], timeout=min(180, self.left()),
                 env=dict(os.environ), log=self.out / "build.log")
        return {"sdist": self.sdist().name, "configured": "cmake, CPU, " + " ".join(COMMON_CMAKE),
                "note": "the dry run configures the trimmed sdist; the CUDA compile happens on the GPU machine only"}

    def s_data(self) -> dict:
        archive = self.bundle / "econeval-data.tar.gz"
        if not archive.is_file():
            raise StepFailed(f"no {archive}")
        self.run([self.py, "-m", "econeval", "data", "install", str(archive)], timeout=min(120, self.left()), name="data-install")
        tail = self.run([self.py, "-m", "econeval", "data", "verify"], timeout=min(120, self.left()), name="data-verify")
        return {"installed_in": str(self.work / "home" / "data"), "verify": tail.strip().splitlines()[-1:]}

    def s_model(self) -> dict:
        vocab = self.bundle / "tokenizer.model.v3"
        out = self.work / "steps" / "model.json"
        self.run([self.py, str(REPO / "tools" / "gpu_model.py"), str(self.model), "--vocab", str(vocab), "--json", str(out),
                  *(["--tiny"] if self.dry else [])], timeout=min(300, self.left()), env=self.env(), name="model")
        return json.loads(out.read_text())

    def final(self, mem: GpuMemory | None) -> None:
        self.doc["peak_gpu_memory_mib"] = mem.peak_mib if mem else None
        counts_file = self.bundle / "token_counts.json"
        counts = json.loads(counts_file.read_text()) if counts_file.is_file() else {}
        measured = (self.doc["steps"].get("econeval") or {}).get("result") or {}
        weight = generated_weight((self.doc["steps"].get("engine") or {}).get("result") or {},
                                  (measured.get("backend") or {}).get("parallel"))
        self.doc["projection"] = project(measured.get("tasks") or {}, counts, measured.get("samples") or {}, weight)
        extra = sorted(p for p in self.out.rglob("*") if p.is_file() and p.name not in RETURNED and not p.name.startswith("results"))
        for p in extra:  # only the named files come back (the device tool returns at most 8)
            shutil.move(str(p), str(self.work / p.name))
        cap(self.out / "build.log", 15 << 20)
        self.doc["files"] = sorted(str(p.relative_to(self.out)) for p in self.out.rglob("*") if p.is_file())
        if extra:
            self.doc["not_returned"] = [p.name for p in extra]
        failed = [k for k, v in self.doc["steps"].items() if v.get("status") != "ok"]
        self.doc["status"] = "complete" if not failed and not self.doc["skipped"] else "partial"
        if failed:
            self.doc["failed"] = failed
        self.save()
        n = len(self.doc["files"]) + ("gpu_check.log" not in self.doc["files"])  # the shell writes the log
        if n > MAX_FILES:
            self.say(f"warning: {n} files in {self.out}, more than the {MAX_FILES} that come back")

    def go(self) -> None:
        self.doc["plan"] = plan(self.dry)
        self.step("env", self.s_env, need_s=0)
        if not self.doc["steps"]["env"].get("status") == "ok":
            self.final(None)
            return
        self.step("install", self.s_install)
        building = self.build_step()
        self.step("data", self.s_data)
        self.step("model", self.s_model)
        if building is not None:
            rec = self.doc["steps"]["build"]
            rec["status"] = "running"
            self.save()
            try:
                rec.update(status="ok", result={**building, **self.wait_build()})
            except StepFailed as exc:
                rec.update(status="failed", error=str(exc)[-3000:])
            rec["seconds"] = round(time.time() - self.build_t0, 1)
            self.say(f"build: {rec['status']} in {rec['seconds']} s")
            self.save()
        ready = all((self.doc["steps"].get(k) or {}).get("status") == "ok" for k in ("install", "build", "data", "model"))
        if not ready:
            for name in ("smoke", "econeval", "configs", "engine", "bench-1", "bench-2"):
                self.skip(name, "an earlier step failed: " + ", ".join(k for k in ("install", "build", "data", "model")
                                                                        if (self.doc["steps"].get(k) or {}).get("status") != "ok"))
            self.final(None)
            return
        with GpuMemory() as mem:
            self.step("smoke", lambda: self.sub_step("smoke", min(120, self.left())), need_s=30)
            # econeval first (the headline), then the engine's own rates, then bench.py with what is left
            # econeval's chunks start within run_s; the in-flight chunk may overrun it, then SIGTERM ends the run
            # (econeval marks it interrupted, and the step still reports what ran)
            # with a carried build there is time for the engine's runs and a bench section after it
            # then the configurations (CONFIGS_S, cuBLAS CUBLAS_S) and the engine's rates (ENGINE_S), each within
            # what is left; the rest only with time to spare
            left = self.left()
            run_s = min(RUN_S, max(30.0, left - (CONFIGS_S + CUBLAS_S + ENGINE_S if left > 400 else 90 if left > 200 else 45)))
            self.step("econeval", lambda: self.sub_step("econeval", self.left() - 5, "--run-s", str(int(run_s)), grace=20), need_s=60)
            self.step("configs", lambda: self.sub_step("configs", min(CONFIGS_S, self.left() - 5)), need_s=40)
            if not self.dry:  # the CPU build has no cuBLAS
                self.step("configs-cublas", lambda: self.sub_step("configs-cublas", min(CUBLAS_S, self.left() - 5),
                                                                  env={"GGML_CUDA_FORCE_CUBLAS": "1"}), need_s=40)
            self.step("engine", lambda: self.sub_step("engine", min(ENGINE_S, self.left() - 5)), need_s=30)
            if not self.dry:  # the CPU build has no flash attention to compare with
                self.step("engine-fa-off", lambda: self.sub_step("engine-fa-off", min(90, self.left() - 5)), need_s=60)
            self.step("bench-1", lambda: self.bench("1"), need_s=40 if self.dry else 90)
            self.step("bench-2", lambda: self.bench("2"), need_s=40 if self.dry else 120)
        self.final(mem)

    def build_step(self) -> dict | None:
        """The dry run's configure, else the carried build where it loads and offloads, else the sdist's
        compile started (its record, waited for later; the carried build's failed try kept as `prebuilt`)."""
        if self.dry:
            self.step("build", self.configure)
            return None
        if self.prebuilt() is not None and self.step("build", self.install_prebuilt) is not None:
            return None
        if "build" in self.doc["steps"]:  # the carried build did not load: compile the sdist after all
            self.doc["steps"]["prebuilt"] = self.doc["steps"].pop("build")
        return self.step("build", self.start_build)

    def bench(self, section: str) -> dict:
        """tools/bench.py's section 1 (EconNLI zero-shot against the engine floor) or 2 (CoT generation
        against llama.cpp's batched decode at the same N), with offload."""
        out = self.work / f"bench-{section}.json"
        sizes = ["--items", "4", "--cot-items", "4"] if self.dry else ["--items", "100", "--cot-items", "32", "--n-gpu-layers", "-1"]
        self.run([self.py, str(REPO / "tools" / "bench.py"), "--model", str(self.model), "--sections", section, *sizes, "--json", str(out)],
                 timeout=self.left() - 5, name=f"bench-{section}")
        return json.loads(out.read_text())


def plan(dry: bool) -> dict:
    """The time budget per step (estimates until a GPU run measures them; gpu_check.json's
    steps then say what each took)."""
    if dry:
        return {"note": "dry run: the same steps on this machine's CPU, tiny layers"}
    return {"limit_s": LIMIT_S, "estimates_s": {
        "env+install": "10 (measured here: pip --target of 4 small wheels)",
        "build": "about 6 (measured) when the bundle carries a CUDA build compiled elsewhere (tools/gpu_bundle.py --build-cuda) and it "
                 "loads; else about 300 in the background without the flash-attention kernels, about 410 with them (GPU_CHECK_FA=on): "
                 "estimates from one-core compile times of sampled files measured on a 2-core development machine (4,700 and 6,500 "
                 f"CPU-seconds over 16 cores); stopped when fewer than {MEASURE_MIN_S} s would be left to measure",
        "data": "5 (install + verify of 21 MB)", "model": "20-60 (4.1 GB written while the build runs)",
        "smoke": "10-20 (load 4.1 GB onto the GPU)",
        "econeval": f"up to min({RUN_S:.0f}, what is left - {CONFIGS_S + CUBLAS_S + ENGINE_S:.0f}) for chunk starts, --limit 16 "
                    "(91 s measured for every task under the unified layout, 2026-12-04)",
        "configs": f"up to {CONFIGS_S:.0f} ({len(CONFIGS)} configurations, a model load and the workload each; those that no "
                   "longer fit are said skipped)",
        "configs-cublas": f"up to {CUBLAS_S:.0f} ({len(CUBLAS_CONFIGS)} configurations with GGML_CUDA_FORCE_CUBLAS=1)",
        "engine": f"up to {ENGINE_S:.0f} (7 runs, flash attention auto: N 1-128, prompts of 128 and 1,024; those that no longer "
                  "fit are skipped)",
        "engine-fa-off": "up to 90 (3 runs without flash attention, a process of their own)", "bench-1": "what is left, when 90 s or more",
        "bench-2": "what is left, when 120 s or more"}}


def cap(path: Path, limit: int) -> None:
    """A file over `limit` bytes keeps its first MiB and its end (the device tool returns 16 MiB a file)."""
    if path.is_file() and path.stat().st_size > limit:
        data = path.read_bytes()
        path.write_bytes(data[:1 << 20] + b"\n[... cut by gpu_check.py ...]\n" + data[-(limit - (2 << 20)):])


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for cand in sorted(glob.glob("/usr/local/cuda*/bin/nvcc"), reverse=True):
        return cand
    return None


def toolkit_root(nvcc: str) -> Path:
    """The toolkit's folder as nvcc itself names it (`_HERE_`, its bin folder: nvcc on PATH may be a
    wrapper script elsewhere), else the folder above the resolved nvcc's."""
    try:
        out = subprocess.run([nvcc, "--dryrun", "-E", "-x", "cu", os.devnull], capture_output=True, text=True, timeout=30)
        found = re.search(r"^#\$ _HERE_=(.+)$", out.stdout + out.stderr, re.M)
        if found and Path(found.group(1).strip()).is_dir():
            return Path(found.group(1).strip()).resolve().parent
    except (OSError, subprocess.SubprocessError):
        pass
    return Path(os.path.realpath(nvcc)).parent.parent


def cuda_hints(nvcc: str, site_roots: list[Path] | None = None) -> tuple[list[str], dict]:
    """CMake arguments for a toolkit without cuBLAS or the driver stub (a toolkit assembled from
    NVIDIA's wheels): cuBLAS from python3's nvidia wheels (nvidia/cu13 or nvidia/cublas), the
    driver library where the driver put it; without one, VMM off (ggml links libcuda only for it)."""
    root = toolkit_root(nvcc)
    libdirs = [root / "lib64", root / "lib", root / "targets" / "x86_64-linux" / "lib"]
    incdirs = [root / "include", root / "targets" / "x86_64-linux" / "include"]
    args: list[str] = []
    info: dict = {"toolkit": str(root), "ld_library_path": [str(d) for d in libdirs if glob.glob(str(d / "libcudart.so*"))][:1]}
    have_lib = any(glob.glob(str(d / "libcublas.so*")) for d in libdirs)
    have_inc = any((d / "cublas_v2.h").is_file() for d in incdirs)
    if not (have_lib and have_inc):
        import site

        roots = site_roots or [Path(p) for p in site.getsitepackages() + [site.getusersitepackages()]]
        for base in roots:
            for sub in ("nvidia/cu13", "nvidia/cublas"):
                lib, inc = base / sub / "lib", base / sub / "include"
                cublas = sorted(glob.glob(str(lib / "libcublas.so*")))
                cublas_lt = sorted(glob.glob(str(lib / "libcublasLt.so*")))
                if cublas and cublas_lt and (inc / "cublas_v2.h").is_file():
                    args += [f"-DCUDA_cublas_LIBRARY={cublas[-1]}", f"-DCUDA_cublasLt_LIBRARY={cublas_lt[-1]}",
                             f"-DCMAKE_CUDA_FLAGS=-I{inc}", f"-DCMAKE_CXX_FLAGS=-I{inc}"]
                    info["cublas"] = str(lib)
                    info["ld_library_path"].append(str(lib))
                    break
            if "cublas" in info:
                break
        else:
            info["cublas"] = "not found outside the toolkit (the build will say what is missing)"
    else:
        info["cublas"] = "in the toolkit"
    stubs = [root / "lib64" / "stubs", root / "lib" / "stubs", root / "targets" / "x86_64-linux" / "lib" / "stubs"]
    if not any(glob.glob(str(d / "libcuda.so*")) for d in stubs + libdirs):
        driver = sorted(glob.glob("/usr/local/nvidia/lib64/libcuda.so*") + glob.glob("/usr/lib/x86_64-linux-gnu/libcuda.so*")
                        + glob.glob("/usr/lib64/libcuda.so*"))
        if driver:
            args.append(f"-DCUDA_cuda_driver_LIBRARY={driver[0]}")
            info["driver_library"] = driver[0]
        else:
            args.append("-DGGML_CUDA_NO_VMM=ON")
            info["driver_library"] = "not found: GGML_CUDA_NO_VMM=ON"
    return args, info


def build_progress(log: Path) -> str | None:
    """The last `[k/n]` ninja printed."""
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, log.stat().st_size - 20000))
            found = re.findall(rb"\[(\d+)/(\d+)\]", fh.read())
    except OSError:
        return None
    return f"{found[-1][0].decode()}/{found[-1][1].decode()}" if found else None


def ninja_times(log: Path) -> dict | None:
    """Each file's compile time from ninja's log, summed by kind (the CPU-seconds a build of other
    options would take follow from these), and the ten slowest."""
    try:
        rows = [line.split("\t") for line in log.read_text().splitlines() if line and not line.startswith("#")]
    except OSError:
        return None
    secs = {r[3]: (int(r[1]) - int(r[0])) / 1000 for r in rows if len(r) >= 4}
    kinds = {"fattn": r"fattn", "mmq-instance": r"mmq-instance", "mmf-instance": r"mmf-instance", "other .cu": r"\.cu\.o$",
             "C/C++": r"\.(c|cpp)\.o$"}
    by: dict[str, list[float]] = {k: [] for k in [*kinds, "link and other"]}
    for target, t in secs.items():
        by[next((k for k, rx in kinds.items() if re.search(rx, target)), "link and other")].append(t)
    slow = sorted(secs.items(), key=lambda kv: -kv[1])[:10]
    return {"files": len(secs), "serial_s": round(sum(secs.values()), 1),
            "by_kind": {k: {"n": len(v), "serial_s": round(sum(v), 1)} for k, v in by.items() if v},
            "slowest": {Path(k).name: round(v, 1) for k, v in slow}}


def generated_weight(engine: dict, parallel: int | None) -> float | None:
    """What a generated token costs in prompt tokens: llama.cpp's batched prompt rate over its
    generation rate (the engine step, flash attention auto, 128-token prompts) at the run's
    --parallel, or the nearest N measured; None without a measurement."""
    rows = engine.get("flash_attention auto, prompt 128") or engine.get("flash_attention off, prompt 128") or {}
    rates = {int(n): r for n, r in rows.items() if isinstance(r, dict) and r.get("generated_tokens_per_s")}
    if not rates:
        return None
    n = min(rates, key=lambda k: (abs(k - (parallel or 64)), -k))
    return round(rates[n]["prompt_tokens_per_s"] / rates[n]["generated_tokens_per_s"], 2)


def project(tasks: dict, counts: dict, samples: dict | None = None, weight: float | None = None) -> dict:
    """A full --suite all: each task's measured seconds scaled by the full set's tokens over the
    sample's (prompt tokens as the tokenizer counts them, before prefixes are shared, and generated
    tokens: the budgets of the full set, what the sample generated), so that the sample's prefix
    sharing and batching carry over. Without the samples' counts (an older result): the full set's
    tokens at the task's tokens/s, which counts every shared prefix again.

    `likely`: the same scaling to the full set's likely generated tokens (its reference answers'
    lengths), a generated token counted as `weight` prompt tokens (`generated_weight`; 1 without
    one): what a model that answers as the references do would take."""
    if not counts:
        return {"note": "no token_counts.json (tools/gpu_bundle.py writes it): no projection"}
    if not tasks:
        return {"note": "no econeval measurement: no projection"}
    total = 0.0
    per: dict[str, float | None] = {}
    for name, c in counts.get("tasks", {}).items():
        t, got = tasks.get(name) or {}, (samples or {}).get(name) or {}
        done = (got.get("prompt_tokens") or 0) + (got.get("generated_tokens") or 0)
        if t.get("seconds") and done:
            secs = t["seconds"] * (c["prompt_tokens"] + c["max_generated_tokens"]) / done
        elif t.get("tokens_per_s") and samples is None:
            secs = (c["prompt_tokens"] + c["max_generated_tokens"]) / t["tokens_per_s"]
        else:
            per[name] = None
            continue
        per[name] = round(secs, 1)
        total += secs
    method = ("each task's seconds in the sample x (the full set's prompt tokens + generation budgets) / (the sample's prompt "
              "tokens + generated tokens)" if samples is not None else
              "token counts of every item / the task's measured tokens/s (shared prefixes counted again: high)")
    return {"seconds_per_task": per, "total_s": round(total, 1), "total_min": round(total / 60, 1),
            "complete": all(v is not None for v in per.values()),
            "method": method + "; prompts: Mistral 7B v0.3's tokenizer; generation: each request's max_tokens, an upper "
                               "bound where a model stops early (a random-weight model never does)",
            "tokenizer": counts.get("tokenizer"), "likely": likely(tasks, counts, samples or {}, weight)}


def likely(tasks: dict, counts: dict, samples: dict, weight: float | None) -> dict:
    """`project`'s likely time: the reference answers' lengths (see there)."""
    w = weight or 1.0
    per: dict[str, float | None] = {}
    for name, c in counts.get("tasks", {}).items():
        t, got = tasks.get(name) or {}, samples.get(name) or {}
        done = (got.get("prompt_tokens") or 0) + w * (got.get("generated_tokens") or 0)
        if not (t.get("seconds") and done and c.get("likely_generated_tokens") is not None):
            per[name] = None
            continue
        per[name] = round(t["seconds"] * (c["prompt_tokens"] + w * c["likely_generated_tokens"]) / done, 1)
    total = sum(v for v in per.values() if v is not None)
    return {"seconds_per_task": per, "total_s": round(total, 1), "total_min": round(total / 60, 1),
            "complete": bool(per) and all(v is not None for v in per.values()), "generated_weight": weight,
            "method": "each task's seconds in the sample x (the full set's prompt tokens + w x its likely generated tokens) / "
                      "(the sample's prompt tokens + w x its generated tokens); likely: each request's reference answer's "
                      "tokens and a stop, at most its budget (token_counts.json says how many had one); w: a generated "
                      "token's cost in prompt tokens, " + (f"{weight} from llama.cpp's batched rates at the run's --parallel"
                                                            if weight else "1 (no engine measurement)")}


# ---- the measuring steps (each in its own process: `gpu_check.py step NAME OUT`) ----------------
def work_dir() -> Path:
    return Path(os.environ["GPU_CHECK_WORK"])


def deadline() -> float:
    return float(os.environ.get("GPU_CHECK_DEADLINE") or time.time() + 600)


def step_smoke(out: Path, dry: bool) -> dict:
    """The build loads, offloads every layer, tokenizes as SentencePiece does and decodes."""
    import llama_cpp
    import numpy as np
    from llama_cpp import _internals

    import econeval

    model_path = work_dir() / "model.gguf"
    res: dict = {"llama_cpp": llama_cpp.__file__, "llama_cpp_version": llama_cpp.__version__, "econeval": econeval.__file__,
                 "gpu_offload_supported": bool(llama_cpp.llama_supports_gpu_offload()),
                 "system_info": llama_cpp.llama_print_system_info().decode(errors="replace")}
    if not Path(econeval.__file__).resolve().is_relative_to(REPO):
        raise RuntimeError(f"econeval was imported from {econeval.__file__}, not from {REPO}")
    if not dry and not res["gpu_offload_supported"]:
        raise RuntimeError("this llama.cpp build does not offload to a GPU")
    mp = llama_cpp.llama_model_default_params()
    mp.n_gpu_layers = 0 if dry else 0x7FFFFFFF
    t0 = time.perf_counter()
    model = _internals.LlamaModel(path_model=str(model_path), params=mp, verbose=False)
    res["load_s"] = round(time.perf_counter() - t0, 2)
    got = {t: model.tokenize(t.encode(), add_bos=True, special=False) for t in TOKENS}
    res["tokenization_matches_sentencepiece"] = got == TOKENS
    if got != TOKENS:
        raise RuntimeError(f"llama.cpp tokenizes {got}, SentencePiece {TOKENS}")
    try:
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_file=str(Path(os.environ["GPU_BUNDLE"]) / "tokenizer.model.v3"))
        texts = ["Interest rates rose 0.25% in 2024; the yen fell.", "公司营业收入同比增长 12%", "  two  spaces\n\nnew lines "]
        same = [model.tokenize(t.encode(), add_bos=False, special=False) == sp.encode(t) for t in texts]
        res["sentencepiece_check"] = f"{sum(same)}/{len(same)} texts tokenized alike by sentencepiece {sentencepiece.__version__}"
    except ImportError:
        res["sentencepiece_check"] = "sentencepiece not installed here: checked against the ids recorded in gpu_check.py"
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = 1024, 512, 512
    cp.n_threads = cp.n_threads_batch = os.cpu_count() or 1
    ctx = _internals.LlamaContext(model=model, params=cp, verbose=False)
    batch = llama_cpp.llama_batch_init(512, 0, 1)
    n_vocab = model.n_vocab()
    ids = [(7919 * k) % (n_vocab - 1000) + 1000 for k in range(1, 513)]

    def decode(tokens, start):
        for i, t in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, start + i, 1, i == len(tokens) - 1
            batch.seq_id[i][0] = 0
        batch.n_tokens = len(tokens)
        if llama_cpp.llama_decode(ctx.ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, len(tokens) - 1), shape=(n_vocab,)).copy()

    t0 = time.perf_counter()
    logits = decode(ids, 0)
    t1 = time.perf_counter()
    finite = bool(np.isfinite(logits).all())
    for k in range(32):
        logits = decode([int(np.argmax(logits))], 512 + k)
        finite = finite and bool(np.isfinite(logits).all())
    t2 = time.perf_counter()
    res.update(prompt_512_tokens_per_s=round(512 / (t1 - t0), 1), generate_32_tokens_per_s=round(32 / (t2 - t1), 1), finite_logits=finite)
    llama_cpp.llama_batch_free(batch)
    ctx.close()
    model.close()
    if not finite:
        raise RuntimeError("the model's logits are not finite")
    return res


def step_econeval(out: Path, dry: bool, run_s: float) -> dict:
    """Every task (--limit 16, or GPU_CHECK_ITEMS; the dry run 1) with the product's defaults for a model given by path:
    its n_ctx, parallel, offload and flash attention are whatever econeval chooses, and run.json's
    backend section records them. No chunk starts after `run_s`. The CFBenchmark generation tasks'
    similarity stage goes to the carried stand-in embedder: their samples come back without it."""
    from dataclasses import dataclass

    import econeval
    from econeval.errors import Interrupted
    from econeval.run.selection import Limit

    @dataclass
    class LimitBy(Limit):
        """--limit N with a budget's two rules: no chunk starts after `deadline` (time.monotonic()),
        and the tasks take turns a chunk at a time, the cheapest first."""

        deadline: float | None = None
        interleave = True

    work = work_dir()
    limit = 1 if dry else int(os.environ.get("GPU_CHECK_ITEMS") or 16)
    selection = LimitBy(limit, deadline=time.monotonic() + run_s)
    tasks = suite_tasks()
    run_dir = work / "run"
    t0 = time.monotonic()
    try:
        run = econeval.RunSpec(model=str(work / "model.gguf"), embedder=str(Path(os.environ["GPU_BUNDLE"]) / "embedder"),
                               progress=False)
        doc = econeval.evaluate(run, tasks, selection=selection, out=run_dir, bootstrap=0)
    except Interrupted:  # SIGTERM at the step's time limit: run.json is marked interrupted, its finished tasks timed
        doc = {"tasks": {}}
    secs = round(time.monotonic() - t0, 1)
    meta = json.loads((run_dir / "run.json").read_text())
    shutil.copy(run_dir / "run.json", out / "run.json")
    for res in run_dir.glob("results*.json"):
        shutil.copy(res, out / res.name)
    n_cfb = strip_similarity(run_dir / "samples.jsonl", out / "cfbenchmark-samples.jsonl")
    saved = samples_summary(run_dir / "samples.jsonl")
    per = {}
    for name, t in (meta.get("timing") or {}).items():
        secs_t = t.get("seconds") or None
        toks = (t.get("tokens_evaluated") or 0) + (t.get("tokens_generated") or 0)
        per[name] = {"items": t.get("items_run"), "seconds": t.get("seconds"), "tokens_evaluated": t.get("tokens_evaluated"),
                     "tokens_generated": t.get("tokens_generated"), "decode_calls": t.get("decode_calls"),
                     "tokens_per_s": round(toks / secs_t, 1) if secs_t else None,
                     "n_errors": (doc["tasks"].get(name) or {}).get("n_errors")}
    backend = {k: v for k, v in (meta.get("backend") or {}).items() if k not in ("schedule", "decoding")}
    return {"limit": limit, "run_s": secs, "chunk_deadline_s": run_s, "status": meta.get("status"),
            "not_run": sorted(set(tasks) - set(per)), "backend": backend, "schedule": meta.get("schedule"),
            "run_projection": meta.get("projection"), "over_context": meta.get("over_context"), "tasks": per, "samples": saved,
            "cfbenchmark_samples": n_cfb,
            "embedder": "the carried stand-in (tiny random ONNX): CFBenchmark generation scores in results.json mean "
                        "nothing; score cfbenchmark-samples.jsonl back here with `econeval score`"}


def suite_tasks() -> list[str]:
    """The tasks of `--suite all` (a tool's task, auto-STEER's writer and checker, needs its
    command's input and is in no suite), the judged one last."""
    from econeval import registry

    every = registry.suites()["all"]
    return [t for t in every if t != "econnli-gen"] + [t for t in every if t == "econnli-gen"]


def samples_summary(samples: Path) -> dict:
    """Per task, from samples.jsonl: items saved, their prompt and generated tokens, errors (beside
    run.json's timing, which an interrupted run also writes)."""
    out: dict[str, dict] = {}
    for line in samples.read_text().splitlines() if samples.is_file() else []:
        row = json.loads(line)
        t = out.setdefault(row.get("task", "?"), {"items": 0, "prompt_tokens": 0, "generated_tokens": 0, "errors": 0})
        t["items"] += 1
        t["errors"] += bool(row.get("error"))
        for call in (row.get("calls") or {}).values():
            t["prompt_tokens"] += call.get("n_prompt_tokens") or 0
            t["generated_tokens"] += call.get("n_tokens") or 0
    return out


def strip_similarity(samples: Path, dest: Path) -> int:
    """The CFBenchmark lines of a samples.jsonl, each without its similarity (the stand-in
    embedder's): `econeval score` then runs the embedder stage itself."""
    n = 0
    with open(samples) as src, open(dest, "w") as dst:
        for line in src:
            row = json.loads(line)
            if not str(row.get("task", "")).startswith("cfbenchmark"):
                continue
            row.pop("similarity", None)
            (row.get("calls") or {}).pop("similarity", None)
            if row.get("error") == "the embedder produced a non-finite similarity":
                row.pop("error")
            dst.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


# (flash attention, N, prompt tokens): 1,024 is about CFBenchmark's prompt length, where attention weighs most. The
# runs without flash attention go in a process of their own: on the H200 one of them stopped the process (a CUDA
# "illegal instruction" at N 32), which would have taken the other rows with it
ENGINE_RUNS = [("auto", n, 128) for n in (1, 8, 32, 64, 128)] + [("auto", 32, 1024), ("auto", 64, 1024)]
ENGINE_RUNS_OFF = [("off", 64, 128), ("off", 32, 1024), ("off", 32, 128)]
FLASH = {"auto": "LLAMA_FLASH_ATTN_TYPE_AUTO", "off": "LLAMA_FLASH_ATTN_TYPE_DISABLED", "on": "LLAMA_FLASH_ATTN_TYPE_ENABLED"}


def batched_rates(path: Path, n_gpu_layers: int, runs=ENGINE_RUNS, gen: int = 64, until: float | None = None,
                  on_row: Callable[[dict], None] | None = None) -> dict:
    """llama.cpp's own batched greedy decode (as `llama-batched-bench` does it), for each run
    (flash attention, N, prompt length): N sequences, each a prompt then `gen` tokens; aggregate
    tokens/s of the prompts and of the generation, under "flash attention/prompt length" then N.
    No new run starts after `until` (time.time()); `on_row` gets what is measured after each run."""
    import llama_cpp
    import numpy as np
    from llama_cpp import _internals

    mp = llama_cpp.llama_model_default_params()
    mp.n_gpu_layers = 0x7FFFFFFF if n_gpu_layers == -1 else n_gpu_layers
    model = _internals.LlamaModel(path_model=str(path), params=mp, verbose=False)
    out: dict = {}
    for fa, n, prompt_tokens in runs:
        row = out.setdefault(f"flash_attention {fa}, prompt {prompt_tokens}", {})
        if until is not None and time.time() > until:
            row[str(n)] = "skipped: the step's time was spent"
            continue
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx = n * (prompt_tokens + gen) + 16
        cp.n_batch, cp.n_ubatch, cp.n_seq_max, cp.kv_unified = 2048, 512, n, True
        cp.n_threads = cp.n_threads_batch = os.cpu_count() or 1
        cp.flash_attn_type = getattr(llama_cpp, FLASH[fa])
        ctx = _internals.LlamaContext(model=model, params=cp, verbose=False)
        batch = llama_cpp.llama_batch_init(2048, 0, n)
        n_vocab = model.n_vocab()
        rng = np.random.default_rng(n)

        def decode(entries):
            for i, (t, p, s, o) in enumerate(entries):
                batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, p, 1, o
                batch.seq_id[i][0] = s
            batch.n_tokens = len(entries)
            if llama_cpp.llama_decode(ctx.ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")

        prompts = rng.integers(1000, n_vocab, size=(n, prompt_tokens)).tolist()
        body = [(t, k, s, False) for s in range(n) for k, t in enumerate(prompts[s][:-1])]
        t0 = time.perf_counter()
        for i in range(0, len(body), 2048):
            decode(body[i:i + 2048])
        decode([(prompts[s][-1], prompt_tokens - 1, s, True) for s in range(n)])  # sequence s's logits at index s
        llama_cpp.llama_synchronize(ctx.ctx)
        t1 = time.perf_counter()
        for step in range(gen):
            toks = [int(np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, s), shape=(n_vocab,))))
                    for s in range(n)]
            decode([(t, prompt_tokens + step, s, True) for s, t in enumerate(toks)])
        llama_cpp.llama_synchronize(ctx.ctx)
        t2 = time.perf_counter()
        row[str(n)] = {"prompt_tokens_per_s": round(n * prompt_tokens / (t1 - t0), 1),
                       "generated_tokens_per_s": round(n * gen / (t2 - t1), 1)}
        llama_cpp.llama_batch_free(batch)
        ctx.close()
        if on_row is not None:
            on_row(out)
    model.close()
    return out


def step_engine(out: Path, dry: bool, name: str) -> dict:
    """The engine's runs, its result written after each one (a crash keeps the rows before it)."""
    if dry:
        runs = [("off", 1, 128), ("off", 8, 128)]  # no flash attention on the CPU build
    else:
        runs = ENGINE_RUNS_OFF if name == "engine-fa-off" else ENGINE_RUNS
    return batched_rates(work_dir() / "model.gguf", 0 if dry else -1, runs=runs, until=deadline() - (15 if dry else 30),
                         on_row=lambda rows: write_json(work_dir() / "steps" / f"{name}.json", rows))


def config_workload(work: dict[str, tuple[int, int]]) -> dict[str, list]:
    """Each task's first-stage requests for `work`'s items, generation capped (tools/bench_layout.py's)."""
    import dataclasses

    from bench_layout import chunks

    out = {}
    for task, (items, cap) in work.items():
        reqs = [r for chunk in chunks(task, items, 10**6) for r in chunk]
        out[task] = [dataclasses.replace(r, max_tokens=min(r.max_tokens, cap)) if getattr(r, "max_tokens", 0) else r for r in reqs]
    return out


def step_configs(out: Path, dry: bool, name: str) -> dict:
    """One workload under each configuration in turn (a backend of its own each, the model loaded
    again): per configuration its seconds per task, what the engine counted, and how many of its
    answers are the first configuration's. Its result is written after each one (a crash keeps the
    ones before); none starts after the step's deadline less a margin."""
    from econeval.backends.base import Settings
    from econeval.run import roles
    from econeval.store.runmeta import chunk_size
    from econeval.types import Completion

    configs = DRY_CONFIGS if dry else CUBLAS_CONFIGS if name == "configs-cublas" else CONFIGS
    work = config_workload(DRY_WORK if dry else CONFIG_WORK)
    spec = roles.resolve(str(work_dir() / "model.gguf"))
    res: dict = {"workload": {t: {"requests": len(r), "items_and_cap": list((DRY_WORK if dry else CONFIG_WORK)[t])} for t, r in work.items()},
                 "env": {k: os.environ[k] for k in ("GGML_CUDA_FORCE_CUBLAS",) if k in os.environ}, "configs": {}}
    first: list | None = None
    until = deadline() - (10 if dry else 20)
    for cname, opts in configs:
        if time.time() > until:
            res["configs"][cname] = {"skipped": "the step's time was spent"}
            continue
        row: dict = {"options": opts}
        res["configs"][cname] = row
        try:
            t0 = time.perf_counter()
            be = roles.build(roles.with_options(spec, {**opts, **({"n_gpu_layers": 0} if dry else {})}), Settings(seed=0))
            row["load_s"] = round(time.perf_counter() - t0, 2)
            info = be.info()
            size = chunk_size(info.parallel)
            c0, answers, secs = be.counters(), [], {}
            for task, reqs in work.items():
                t1 = time.perf_counter()
                for k in range(0, len(reqs), size):  # a chunk at a time, as the runner sends them (one request an item here)
                    answers += be.evaluate(reqs[k:k + size])
                secs[task] = round(time.perf_counter() - t1, 2)
            row.update(seconds=secs, total_s=round(sum(secs.values()), 2),
                       counters={k: v - c0.get(k, 0) for k, v in be.counters().items()},
                       stream_cells=info.settings.get("stream_cells"), n_ubatch=info.details.get("n_ubatch"),
                       device_note=info.device_note)
            texts = [a.text for a in answers if isinstance(a, Completion)]
            if first is None:
                first = texts
            row["same_answers_as_first"] = f"{sum(a == b for a, b in zip(texts, first))}/{len(texts)}"
            be.close()
        except Exception as exc:  # noqa: BLE001 - one configuration's failure (out of memory) leaves the others
            row["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        write_json(work_dir() / "steps" / f"{name}.json", res)
    done = {k: v["total_s"] for k, v in res["configs"].items() if "total_s" in v}
    if done:
        res["fastest"] = min(done, key=lambda k: done[k])
        base = done.get(configs[0][0])
        if base:
            res["over_first"] = {k: round(v / base, 3) for k, v in done.items()}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["all", "step"])
    ap.add_argument("name", nargs="?", help="step: smoke, econeval, configs, configs-cublas, engine or engine-fa-off")
    ap.add_argument("out", type=Path)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--limit-s", type=float, default=LIMIT_S, help="all: the whole command's time limit")
    ap.add_argument("--run-s", type=float, default=240, help="step econeval: no chunk starts after this many seconds")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "all":
        Check(args.out.resolve(), args.dry_run, args.limit_s, float(os.environ.get("GPU_CHECK_T0") or time.time())).go()
        return
    steps = {"smoke": lambda: step_smoke(args.out, args.dry_run), "engine": lambda: step_engine(args.out, args.dry_run, "engine"),
             "engine-fa-off": lambda: step_engine(args.out, args.dry_run, "engine-fa-off"),
             "econeval": lambda: step_econeval(args.out, args.dry_run, args.run_s),
             "configs": lambda: step_configs(args.out, args.dry_run, "configs"),
             "configs-cublas": lambda: step_configs(args.out, args.dry_run, "configs-cublas")}
    result = steps[args.name]()
    write_json(work_dir() / "steps" / f"{args.name}.json", result)
    print(json.dumps(result, default=str)[:3000])


if __name__ == "__main__":
    main()
