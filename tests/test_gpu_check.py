"""The prepared GPU check (tools/gpu_check.sh), proven on the CPU: the bundle as tools/gpu_bundle.py
makes it, and `--dry-run` in a fresh copy of the repository (the files the device tool sends: tracked
and untracked-not-ignored) with an empty cache and no built data, as the GPU machine has them, using
only what the bundle carries: every step but the CUDA ones, the same gpu_check.json. Then the
returned CFBenchmark samples are scored here, as docs/speed-and-gpu.md says."""

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))

import gpu_bundle  # noqa: E402
import gpu_check  # noqa: E402
import gpu_model  # noqa: E402


# ---- quick checks of the parts ------------------------------------------------------------------
def test_the_trim_keeps_what_a_cuda_build_reads():
    keep = ["p/CMakeLists.txt", "p/pyproject.toml", "p/README.md", "p/llama_cpp/llama_cpp.py", "p/vendor/llama.cpp/CMakeLists.txt",
            "p/vendor/llama.cpp/ggml/src/ggml-cuda/mmq.cu", "p/vendor/llama.cpp/ggml/src/ggml-cpu/ggml-cpu.c",
            "p/vendor/llama.cpp/ggml/src/ggml.c", "p/vendor/llama.cpp/src/llama.cpp", "p/vendor/llama.cpp/common/arg.cpp",
            "p/vendor/llama.cpp/vendor/miniaudio/miniaudio.h", "p/vendor/llama.cpp/cmake/common.cmake", "p/vendor/llama.cpp/LICENSE",
            "p/vendor/llama.cpp/licenses/LICENSE-curl"]
    drop = ["p/vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf", "p/vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp",
            "p/vendor/llama.cpp/ggml/src/ggml-metal/ggml-metal.m", "p/vendor/llama.cpp/tools/mtmd/clip.cpp", "p/vendor/llama.cpp/docs/ops/x",
            "p/vendor/llama.cpp/convert_hf_to_gguf.py", "p/vendor/llama.cpp/tests/test-backend-ops.cpp", "p/.git/modules/x", "p/docs/index.md"]
    assert [p for p in keep if gpu_bundle.trimmed_out(p.split("/"))] == []
    assert [p for p in drop if not gpu_bundle.trimmed_out(p.split("/"))] == []


def _proto_piece(piece: str, score: float, kind: int) -> bytes:
    body = b"\x0a" + bytes([len(piece.encode())]) + piece.encode() + b"\x15" + struct.pack("<f", score) + b"\x18" + bytes([kind])
    return b"\x0a" + bytes([len(body)]) + body


def test_the_sentencepiece_model_is_read_by_hand(tmp_path):
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3), ("<0x0A>", 0.0, 6), ("\u2581the", -1.5, 1)]
    normalizer = b"\x1a\x04\x18\x01\x20\x00"  # field 3: add_dummy_prefix 1, remove_extra_whitespaces 0
    f = tmp_path / "t.model"
    f.write_bytes(b"".join(_proto_piece(*p) for p in pieces) + normalizer)
    voc = gpu_model.read_vocab(f)
    assert voc["tokens"] == [p[0] for p in pieces] and voc["types"] == [2, 3, 3, 6, 1] and voc["scores"][-1] == -1.5
    assert (voc["add_dummy_prefix"], voc["remove_extra_whitespaces"], voc["bos"], voc["eos"], voc["unk"]) == (True, False, 1, 2, 0)


def test_k_quant_blocks_dequantize_to_centred_weights():
    checked = gpu_model.check_blocks()  # raises unless finite, mean ~0 and sd ~sigma (gguf's reference dequantizer)
    assert set(checked) == {"Q4_K", "Q6_K"}
    assert [t for n, _, t in gpu_model.tensors(gpu_model.MISTRAL_7B, 32768) if n.endswith(("attn_v.weight", "ffn_down.weight"))].count("Q6_K") \
        == 2 * sum(gpu_model.use_more_bits(i, 32) for i in range(32)) == 2 * 16  # llama.cpp's Q4_K_M mix for 32 layers


def test_a_step_past_its_time_is_stopped_with_its_children(tmp_path):
    check = gpu_check.Check.__new__(gpu_check.Check)
    check.work = tmp_path
    (tmp_path / "steps").mkdir()
    t0 = time.monotonic()
    with pytest.raises(gpu_check.StepFailed, match="time limit"):
        check.run(["bash", "-c", "sleep 31.4159 & sleep 31.4159"], timeout=1.5, env=dict(os.environ), name="sleeper")
    assert time.monotonic() - t0 < 10
    assert subprocess.run(["pgrep", "-f", "sleep 31.4159"], capture_output=True).stdout.strip() == b""  # the child went too


def test_cublas_is_taken_from_nvidias_wheels_when_the_toolkit_lacks_it(tmp_path, monkeypatch):
    """A toolkit assembled from NVIDIA's wheels (nvcc, cudart, no cuBLAS, no driver stub, as the GPU
    machine's may be): CMake is pointed at python3's nvidia/cu13 wheel and the libraries' folders
    go on LD_LIBRARY_PATH."""
    toolkit, site = tmp_path / "cuda-13.0", tmp_path / "site"
    for f in ("bin/nvcc", "lib64/libcudart.so.13", "include/cuda_runtime.h", "nvidia/cu13/lib/libcublas.so.13",
              "nvidia/cu13/lib/libcublasLt.so.13", "nvidia/cu13/include/cublas_v2.h"):
        path = (site if f.startswith("nvidia") else toolkit) / f
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    import site as site_module

    monkeypatch.setattr(site_module, "getsitepackages", lambda: [str(site)])
    args, info = gpu_check.cuda_hints(str(toolkit / "bin" / "nvcc"))
    lib = site / "nvidia" / "cu13" / "lib"
    assert f"-DCUDA_cublas_LIBRARY={lib}/libcublas.so.13" in args and f"-DCUDA_cublasLt_LIBRARY={lib}/libcublasLt.so.13" in args
    assert f"-DCMAKE_CUDA_FLAGS=-I{site}/nvidia/cu13/include" in args
    assert info["ld_library_path"] == [str(toolkit / "lib64"), str(lib)]
    assert "-DGGML_CUDA_NO_VMM=ON" in args or any(a.startswith("-DCUDA_cuda_driver_LIBRARY=") for a in args)
    (toolkit / "lib64" / "libcublas.so.13").write_text("")  # a full toolkit: nothing to point at
    (toolkit / "include" / "cublas_v2.h").write_text("")
    args, info = gpu_check.cuda_hints(str(toolkit / "bin" / "nvcc"))
    assert info["cublas"] == "in the toolkit" and not any("cublas" in a for a in args)


def _wheel(folder: Path, offloads: bool) -> Path:
    """A stand-in llama-cpp-python wheel: `llama_cpp` says whether it offloads, and the wheel holds a
    libggml-cuda.so under two names, as a CUDA build's does."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    whl = folder / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    files = {"llama_cpp/__init__.py": f"def llama_supports_gpu_offload():\n    return {offloads}\n\n\n"
                                      "def llama_print_system_info():\n    return b'CUDA : ARCHS = 900 | FA_ALL_QUANTS = 0'\n",
             "llama_cpp/lib/libggml-cuda.so": "fatbin", "llama_cpp/lib/libggml-cuda.so.0": "fatbin",
             "llama_cpp_python-0.3.36.dist-info/METADATA": "Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: 0.3.36\n",
             "llama_cpp_python-0.3.36.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"}

    def digest(text):
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()

    record = "".join(f"{n},{digest(t)},{len(t.encode())}\n" for n, t in files.items()) + "llama_cpp_python-0.3.36.dist-info/RECORD,,\n"
    with zipfile.ZipFile(whl, "w") as z:
        for n, t in {**files, "llama_cpp_python-0.3.36.dist-info/RECORD": record}.items():
            z.writestr(n, t)
    return whl


@pytest.mark.parametrize("offloads", [True, False])
def test_a_carried_cuda_wheel_replaces_the_build_only_when_it_offloads(tmp_path, monkeypatch, offloads):
    """The bundle carries a wheel compiled elsewhere: installed in place of the build when it loads
    and offloads there; otherwise the step fails with the reason, its folder is gone, and the driver
    compiles the sdist after all (go() keeps the failed try as the step `prebuilt`)."""
    monkeypatch.setattr(gpu_bundle, "OUT", tmp_path / "bundle")
    made = gpu_bundle.prebuilt(_wheel(tmp_path / "dist", offloads))
    assert made["file"] == "prebuilt/llama_cpp_python-0.3.36-cuda.tar.xz" and made["libs"] == ["libggml-cuda.so", "libggml-cuda.so.0"]
    (tmp_path / "bundle" / "bundle.json").write_text(json.dumps({"prebuilt": made}))
    monkeypatch.setenv("GPU_BUNDLE", str(tmp_path / "bundle"))
    monkeypatch.setenv("GPU_CHECK_WORK", str(tmp_path / "work"))
    (tmp_path / "out").mkdir()
    check = gpu_check.Check(tmp_path / "out", dry=False, limit_s=300, t0=time.time())
    assert check.prebuilt() == tmp_path / "bundle" / made["file"]
    result = check.step("build", check.install_prebuilt)
    rec = check.doc["steps"]["build"]
    if offloads:
        assert rec["status"] == "ok" and result["prebuilt"] == Path(made["file"]).name and result["built"] == made["built"]
        assert result["system_info"] == ["CUDA : ARCHS = 900 | FA_ALL_QUANTS = 0"]
        assert (check.site_llama / "llama_cpp" / "__init__.py").is_file()
        lib = check.site_llama / "llama_cpp" / "lib"  # each library once, its other names links to it
        assert (lib / "libggml-cuda.so").is_symlink() and (lib / "libggml-cuda.so").read_text() == "fatbin"
    else:
        assert result is None and rec["status"] == "failed" and "does not load or offload here" in rec["error"]
        assert not check.site_llama.exists()
    # the driver's choice: the carried build when it loaded, else the sdist's compile, the failed try kept
    del check.doc["steps"]["build"]
    check.start_build = lambda: {"compiling": "the sdist"}
    building = check.build_step()
    if offloads:
        assert building is None and "prebuilt" not in check.doc["steps"]
    else:
        assert building == {"compiling": "the sdist"} and check.doc["steps"]["build"]["status"] == "ok"
        assert check.doc["steps"]["prebuilt"]["status"] == "failed"


def test_the_full_suite_projection_scales_the_sample_and_keeps_its_prefix_sharing():
    """A task whose sample of 1,000 prompt and generated tokens took 10 s, where shared prefixes left
    500 tokens to evaluate (50 tokens/s): the full set of 10,000 tokens takes 100 s, not the 200 s
    that its raw tokens at 50 tokens/s would say (the check's first method)."""
    counts = {"tokenizer": "t", "tasks": {"t": {"prompt_tokens": 9000, "max_generated_tokens": 1000}}}
    tasks = {"t": {"seconds": 10.0, "tokens_per_s": 50.0}}
    proj = gpu_check.project(tasks, counts, {"t": {"prompt_tokens": 900, "generated_tokens": 100}})
    assert proj["seconds_per_task"] == {"t": 100.0} and proj["complete"]
    assert gpu_check.project(tasks, counts)["seconds_per_task"] == {"t": 200.0}  # an older result: no samples' counts
    assert gpu_check.project({}, counts, {})["note"] == "no econeval measurement: no projection"


def test_the_likely_projection_takes_the_reference_lengths_at_the_engines_weight():
    """Beside the every-budget bound: the full set at its reference answers' lengths, a generated
    token weighed as llama.cpp's batched prompt rate over its generation rate at the run's
    --parallel (the nearest N measured). A sample of 900 prompt and 100 generated tokens in 10 s,
    w = 3: the full set's 9,000 prompt and 200 likely tokens take 10 x 9,600 / 1,200 = 80 s (the
    budgets' bound: 100 s)."""
    engine = {"flash_attention auto, prompt 128": {"1": {"prompt_tokens_per_s": 2000.0, "generated_tokens_per_s": 250.0},
                                                   "64": {"prompt_tokens_per_s": 9000.0, "generated_tokens_per_s": 3000.0},
                                                   "128": "skipped: the step's time was spent"}}
    assert gpu_check.generated_weight(engine, 64) == 3.0 and gpu_check.generated_weight(engine, 100) == 3.0
    assert gpu_check.generated_weight(engine, 2) == 8.0 and gpu_check.generated_weight({}, 64) is None
    counts = {"tokenizer": "t", "tasks": {"t": {"prompt_tokens": 9000, "max_generated_tokens": 1000, "likely_generated_tokens": 200},
                                          "old": {"prompt_tokens": 10, "max_generated_tokens": 10}}}
    tasks = {"t": {"seconds": 10.0, "tokens_per_s": 50.0}, "old": {"seconds": 1.0}}
    samples = {"t": {"prompt_tokens": 900, "generated_tokens": 100}, "old": {"prompt_tokens": 1, "generated_tokens": 1}}
    proj = gpu_check.project(tasks, counts, samples, 3.0)
    assert proj["seconds_per_task"]["t"] == 100.0
    likely = proj["likely"]
    assert likely["seconds_per_task"] == {"t": 80.0, "old": None} and likely["generated_weight"] == 3.0
    assert not likely["complete"] and "3.0 from llama.cpp's batched rates" in likely["method"]
    assert gpu_check.project(tasks, counts, samples)["likely"]["seconds_per_task"]["t"] == 10.0 * 9200 / 1000  # w 1


def test_reference_answers_give_the_likely_generated_lengths():
    """token_counts.json's likely generated tokens: a request's reference answer's tokens and one
    for the stop, at most its budget; a task without a reference counts its budget."""
    def count(text):
        return len(text.split())

    assert gpu_bundle.likely_tokens("cfbenchmark-few", {"response": "a b c"}, 64, count) == (4, True)
    assert gpu_bundle.likely_tokens("cfbenchmark-zero", {"response": " ".join("x" * 600)}, 512, count) == (512, True)
    assert gpu_bundle.likely_tokens("econlogicqa-5shot", {"answer": "D, A, C, B"}, 64, count) == (5, True)
    assert gpu_bundle.likely_tokens("econnli-zero", {"label": "0"}, 10, count) == (2, True)
    assert gpu_bundle.reference_answers("econnli-zero", {"label": "1"}) == [" Yes"]
    demos = gpu_bundle.reference_answers("econnli-cot", {})
    assert demos and all(d.strip().endswith(("Yes.", "No.", "Yes", "No")) for d in demos), demos
    assert gpu_bundle.likely_tokens("econnli-gen", {"label": "1"}, 100, count) == (100, False)


def test_the_check_runs_the_suites_tasks_only():
    """A tool's task (auto-STEER's checker needs -T templates=FILE) is in no suite: the econeval step
    and the bundle's token counts take `--suite all`'s tasks (every registered task, before, and the
    step failed on the checker)."""
    from econeval import registry

    tasks = gpu_check.suite_tasks()
    assert sorted(tasks) == sorted(registry.suites()["all"]) and tasks[-1] == "econnli-gen"
    assert "auto-steer-check" in registry.tasks() and "auto-steer-check" not in tasks


def test_the_checks_steps_fit_its_time_by_design():
    """The measuring steps' shares and the setup measured on the H200 (env, install, the carried
    build, data, model, smoke: 80 s at most) fit the 9 minutes less the margin; each step is also
    bounded by what is left when it starts (the short-limit test below)."""
    setup = 80
    assert setup + gpu_check.RUN_S + gpu_check.CONFIGS_S + gpu_check.CUBLAS_S + gpu_check.ENGINE_S <= gpu_check.LIMIT_S - gpu_check.MARGIN_S
    plan = gpu_check.plan(dry=False)["estimates_s"]
    assert {"econeval", "configs", "configs-cublas", "engine"} <= set(plan)
    names = [n for n, _ in gpu_check.CONFIGS]
    assert names[0] == "streams-64" and {"unified-64", "streams-128", "streams-255", "streams-64-ubatch2048"} <= set(names)
    assert all(opts["parallel"] <= 255 for _, opts in gpu_check.CONFIGS + gpu_check.CUBLAS_CONFIGS)


def test_the_configurations_are_timed_on_one_workload(tmp_path, tiny_model, monkeypatch):
    """The configs step: each configuration's backend over the same requests, its seconds per
    task, its counters, its answers against the first's; one that fails is recorded and the
    others still run; none starts past the deadline."""
    work = tmp_path / "work"
    (work / "steps").mkdir(parents=True)
    (work / "model.gguf").symlink_to(tiny_model)
    monkeypatch.setenv("GPU_CHECK_WORK", str(work))
    monkeypatch.setenv("GPU_CHECK_DEADLINE", str(time.time() + 600))
    monkeypatch.setattr(gpu_check, "DRY_CONFIGS", [("streams-2", {"kv_layout": "streams", "parallel": 2, "threads": 1}),
                                                   ("unified-2", {"kv_layout": "unified", "parallel": 2, "threads": 1}),
                                                   ("broken", {"kv_layout": "streams", "parallel": 2, "n_ubatch": 7})])
    res = gpu_check.step_configs(tmp_path, True, "configs")
    rows = res["configs"]
    assert res["workload"]["econnli-cot"]["requests"] == 2
    for name in ("streams-2", "unified-2"):
        row = rows[name]
        assert row["total_s"] > 0 and row["seconds"]["econnli-cot"] > 0 and row["counters"]["decode_calls"] > 0
        assert row["same_answers_as_first"] == "2/2"
    assert rows["streams-2"]["stream_cells"] and rows["streams-2"]["counters"]["kv_copies"] > 0
    assert "n_ubatch 7 is out of range" in rows["broken"]["error"]
    assert res["fastest"] in ("streams-2", "unified-2") and res["over_first"]["streams-2"] == 1.0
    assert json.loads((work / "steps" / "configs.json").read_text())["configs"].keys() == rows.keys()
    monkeypatch.setenv("GPU_CHECK_DEADLINE", str(time.time()))
    assert all("skipped" in r for r in gpu_check.step_configs(tmp_path, True, "configs")["configs"].values())


def test_the_engine_bench_sizes_its_context_to_the_group(tiny_model):
    """tools/bench.py's batched decode of 16 sequences in a context of 256 cells given: it makes room
    for the group (a GPU's 64 CoT sequences overflowed its fixed 8,192 cells)."""
    sys.path.insert(0, str(REPO / "tools"))
    import bench

    prompts = [f"Premise: rates rose {i}. Hypothesis: lending fell {i}. " * 4 for i in range(16)]
    rate = bench.engine_batched(str(tiny_model), "Premise:", prompts, [8] * 16, 16, 1, n_ctx=256)
    assert rate > 0


def test_the_bundle_refuses_a_wheel_without_cuda(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_bundle, "OUT", tmp_path / "bundle")
    whl = _wheel(tmp_path / "dist", True)
    import zipfile

    cpu = tmp_path / "cpu" / whl.name
    cpu.parent.mkdir()
    with zipfile.ZipFile(whl) as src, zipfile.ZipFile(cpu, "w") as dst:
        for n in src.namelist():
            if "libggml-cuda" not in n:
                dst.writestr(n, src.read(n))
    with pytest.raises(SystemExit, match="not a CUDA build"):
        gpu_bundle.prebuilt(cpu)


# ---- the bundle and the dry run in a fresh copy ---------------------------------------------------
def fresh_copy(dest: Path) -> None:
    """The files the device tool sends: tracked and untracked-not-ignored ones of the working tree."""
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """.gpu_bundle as tools/gpu_bundle.py makes it where pip works (pip's cache keeps the downloads)."""
    folder = tmp_path_factory.mktemp("gpu") / "bundle"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "tools/gpu_bundle.py"], cwd=REPO, env={**os.environ, "GPU_BUNDLE": str(folder)},
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"bundle made in {time.monotonic() - t0:.0f} s: {proc.stdout.strip().splitlines()[-1]}")
    return folder


@pytest.mark.slow  # downloads the sdist and the vocabulary (pip's cache), every task on a model, bench.py
def test_the_dry_run_in_a_fresh_copy_measures_every_step(tmp_path, bundle):
    made = json.loads((bundle / "bundle.json").read_text())
    assert made["total_mib"] < gpu_bundle.LIMIT_MIB and made["vocabulary"]["pieces"] == 32768
    assert {"econeval-data.tar.gz", "tokenizer.model.v3", "token_counts.json", "embedder/model.onnx"} <= set(made["files"])
    assert any(f.startswith("llama_cpp_python-") and f.endswith("-cuda.tar.gz") for f in made["files"])
    counts = json.loads((bundle / "token_counts.json").read_text())
    assert counts["tasks"]["econnli-zero"]["items"] == 1026 and counts["tasks"]["econnli-zero"]["prompt_tokens"] > 1026 * 20

    copy, out, work = tmp_path / "repo", tmp_path / "out", tmp_path / "work"
    fresh_copy(copy)
    assert not list((copy / "datasets_bundled").glob("*/*.jsonl")) and not (copy / ".gpu_bundle").exists()
    env = {**os.environ, "GPU_BUNDLE": str(bundle), "GPU_CHECK_WORK": str(work), "PYTHON": sys.executable,
           "ECONEVAL_CACHE": str(tmp_path / "empty-cache"), "ECONEVAL_HOME": str(tmp_path / "home")}
    t0 = time.monotonic()
    proc = subprocess.run(["bash", "tools/gpu_check.sh", str(out), "--dry-run"], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=900)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert wall < gpu_check.LIMIT_S
    doc = json.loads((out / "gpu_check.json").read_text())
    print(f"dry run: {wall:.0f} s; steps: " + ", ".join(f"{k} {v.get('seconds')} s" for k, v in doc["steps"].items()))
    assert doc["status"] == "complete" and doc["dry_run"] is True and doc["skipped"] == {}, (doc.get("failed"), doc["skipped"])
    steps = doc["steps"]
    assert set(steps) == {"env", "install", "build", "data", "model", "smoke", "econeval", "configs", "engine", "bench-1", "bench-2"}
    assert all(s["status"] == "ok" for s in steps.values())

    # what comes back: at most 8 files, names the device tool returns
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= gpu_check.MAX_FILES and all(re.fullmatch(r"[A-Za-z0-9._-]+", f) for f in files), files
    assert {"gpu_check.json", "gpu_check.log", "run.json", "cfbenchmark-samples.jsonl"} <= set(files)
    assert (out / "gpu_check.log").read_text().count("gpu_check: done") == 1

    # the carried wheels install as a cp312 set; the data came from the bundle, into the check's own folder
    assert {w.split("-")[0] for w in steps["install"]["result"]["wheels"]} == {"diskcache", "gguf", "orjson", "platformdirs"}
    assert steps["data"]["result"]["verify"] == ["all data files match their manifests"]
    assert Path(steps["data"]["result"]["installed_in"]).is_relative_to(work)

    # the model: Mistral's real vocabulary in tiny layers, Q4_K_M's types, loaded and tokenizing as SentencePiece does
    model = steps["model"]["result"]
    assert model["shapes"]["n_vocab"] == 32768 and model["shapes"]["n_layer"] == 2 and model["vocabulary"]["add_space_prefix"] is True
    assert model["tensor_types"] == {"F32": 5, "Q4_K": 13, "Q6_K": 3}
    smoke = steps["smoke"]["result"]
    assert smoke["tokenization_matches_sentencepiece"] and smoke["finite_logits"]
    assert Path(smoke["econeval"]).resolve().is_relative_to(copy.resolve())  # the copy's econeval, not the checkout's

    # econeval on every task with the product's defaults: run.json's backend section recorded
    from econeval import registry

    ev = steps["econeval"]["result"]
    assert set(ev["tasks"]) == set(registry.suites()["all"]) and ev["not_run"] == []
    assert not ev["over_context"], ev["over_context"]  # the stand-in's trained context is Mistral's: nothing refused
    ran = {k: t for k, t in ev["tasks"].items() if t["items"]}
    assert ran and all(t["tokens_per_s"] and t["n_errors"] == 0 for t in ran.values()), ev["tasks"]
    # a task is left unreached only where its next chunk was projected to end after the step's deadline (a loaded
    # machine: the dry run's tasks take turns a chunk at a time, under the budget's rule), and run.json says so
    stopped = json.loads((out / "run.json").read_text()).get("stopped_early") or {}
    unreached = sorted(set(ev["tasks"]) - set(ran))
    assert not unreached or (stopped.get("why") == "budget spent" and set(unreached) <= set(stopped["tasks_not_reached"])), \
        (unreached, stopped, ev["run_s"], ev["chunk_deadline_s"])
    assert {k: v["items"] for k, v in ev["samples"].items()} == {k: v["items"] for k, v in ev["tasks"].items()}
    assert {"n_ctx", "parallel", "n_batch", "kv_budget", "n_gpu_layers", "flash_attention", "device"} <= set(ev["backend"])
    assert ev["backend"]["device"] == "cpu" and ev["backend"]["n_vocab"] == 32768
    run = json.loads((out / "run.json").read_text())
    assert run["backend"]["n_ctx"] == ev["backend"]["n_ctx"] and run["roles"]["embedder"]["path"] == str(bundle / "embedder")

    engine = steps["engine"]["result"]
    assert set(engine) == {"flash_attention off, prompt 128"} and set(engine["flash_attention off, prompt 128"]) == {"1", "8"}
    assert all(v["generated_tokens_per_s"] > 0 for v in engine["flash_attention off, prompt 128"].values())
    assert steps["bench-1"]["result"]["classification"]["econeval_over_floor"] > 0
    assert steps["bench-2"]["result"]["generation"]["econeval_over_engine"] > 0
    proj = doc["projection"]
    assert proj["complete"] and proj["total_s"] > 0
    assert proj["likely"]["complete"] and 0 < proj["likely"]["total_s"] <= proj["total_s"] and proj["likely"]["generated_weight"]
    assert counts["tasks"]["cfbenchmark-few"]["likely_generated_tokens"] < counts["tasks"]["cfbenchmark-few"]["max_generated_tokens"]
    configs = steps["configs"]["result"]["configs"]
    assert set(configs) == {n for n, _ in gpu_check.DRY_CONFIGS} and all(c["total_s"] > 0 for c in configs.values()), configs

    # back here: the CFBenchmark samples carry no stand-in similarity; `econeval score` runs the embedder stage
    lines = [json.loads(x) for x in (out / "cfbenchmark-samples.jsonl").read_text().splitlines()]
    assert len(lines) == ev["cfbenchmark_samples"] == 16 and all("calls" in x for x in lines)
    assert not any("similarity" in x or "similarity" in x["calls"] for x in lines)
    for task in ("cfbenchmark-zero", "cfbenchmark-few"):
        scored = tmp_path / f"scored-{task}"
        proc = subprocess.run([sys.executable, "-m", "econeval", "score", "--task", task, "--predictions", str(out / "cfbenchmark-samples.jsonl"),
                               "--embedder", str(bundle / "embedder"), "--bootstrap", "0", "--out", str(scored)],
                              cwd=copy, env={**env, "ECONEVAL_HOME": str(work / "home")}, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        res = json.loads((scored / "results.json").read_text())["tasks"][task]
        assert res["n_scored"] == 8 and np.isfinite(res["paper"]["G.Avg"]), res["paper"]

    # econeval stopped at its step's time limit (SIGTERM, as the driver sends it) still reports what ran
    shutil.rmtree(work / "run")
    (work / "steps" / "econeval.json").unlink()
    step_env = {**env, "PYTHONPATH": str(copy), "ECONEVAL_HOME": str(work / "home"), "ECONEVAL_CACHE": str(work / "cache")}
    proc = subprocess.Popen([sys.executable, "tools/gpu_check.py", "step", "econeval", str(tmp_path / "out2"), "--dry-run", "--run-s", "900"],
                            cwd=copy, env=step_env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # stopped once the run has written items (a fixed sleep lost the race on a loaded machine)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        lines = (work / "run" / "samples.jsonl").read_text().count("\n") if (work / "run" / "samples.jsonl").exists() else 0
        if lines >= 4:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the step ended before it was stopped"
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    stopped = json.loads((work / "steps" / "econeval.json").read_text())
    assert stopped["status"] == "interrupted" and stopped["backend"]["n_ctx"] and stopped["run_projection"]["cost_model"]
    assert stopped["samples"] and all(t["items"] and t["prompt_tokens"] for t in stopped["samples"].values()), stopped["samples"]


@pytest.mark.slow
def test_a_short_limit_skips_the_measuring_steps_and_says_why(tmp_path, bundle):
    """The time guard: with 45 s (20 s before the driver's margin) the measuring steps do not fit;
    they are skipped, gpu_check.json says why, and the command ends within its limit."""
    out = tmp_path / "out"
    env = {**os.environ, "GPU_BUNDLE": str(bundle), "GPU_CHECK_WORK": str(tmp_path / "work"), "PYTHON": sys.executable,
           "GPU_CHECK_LIMIT_S": "45"}
    t0 = time.monotonic()
    proc = subprocess.run(["bash", "tools/gpu_check.sh", str(out), "--dry-run"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert time.monotonic() - t0 < 45, proc.stdout[-3000:]
    doc = json.loads((out / "gpu_check.json").read_text())
    assert doc["status"] == "partial" and {"smoke", "econeval", "configs", "engine", "bench-1", "bench-2"} <= set(doc["skipped"])
    assert all("left of the time limit" in why for why in doc["skipped"].values())
    assert doc["steps"]["model"]["status"] == "ok" and doc["projection"] == {"note": "no econeval measurement: no projection"}
