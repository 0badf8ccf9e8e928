"""Bad input: one clear line on stderr, a non-zero exit code, never a traceback."""

import shutil

import pytest

from econeval import data


def assert_clean_failure(rc, out, err, code, *needles):
    assert rc == code, (rc, out, err)
    assert "Traceback" not in err
    progress = ("econeval: run folder ", "econeval: model ")  # what a run says before it fails
    lines = [l for l in err.splitlines() if l.strip() and not l.startswith(progress)]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]


def test_an_unknown_model_file_and_an_unknown_model_name_exit_alike(cli, tmp_path):
    assert_clean_failure(*cli("run", "--model", tmp_path / "nope.gguf", "--limit", "1"), 2, "model file not found")
    assert_clean_failure(*cli("run", "--model", "no-such-model", "--limit", "1"), 2, "unknown model 'no-such-model'")


def test_option_names_get_did_you_mean(cli, tmp_path, tiny_model):
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-zero", "-T", "cot_pars=released-llama", "--limit", "1")
    assert rc == 2 and "did you mean 'cot_parse'?" not in err  # not an option of econnli-zero: it names the task's own
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-cot", "-T", "cot_pars=released-llama", "--limit", "1")
    assert rc == 2 and "did you mean 'cot_parse'?" in err, err
    rc, _, err = cli("run", "--model", tiny_model, "--task", "econnli-zero", "-M", "paralel=2", "--limit", "1")
    assert rc == 2 and "did you mean 'parallel'?" in err, err


def test_file_that_is_not_gguf(cli, tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_text("this is not a model")
    assert_clean_failure(*cli("run", "--model", bad, "--limit", "1"), 1, "is not a GGUF file")


def test_truncated_gguf(cli, tmp_path, tiny_model):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_model.read_bytes()[: tiny_model.stat().st_size // 2])
    assert_clean_failure(*cli("run", "--model", cut, "--task", "econnli-zero", "--limit", "1", "--out", tmp_path / "r"), 1, "could not load")


def test_unknown_task_and_suite_and_model(cli):
    assert_clean_failure(*cli("run", "--task", "econnli-fivehundred"), 2, "unknown task 'econnli-fivehundred'")
    assert_clean_failure(*cli("run", "--suite", "astrology"), 2, "unknown suite 'astrology'")
    assert_clean_failure(*cli("run", "--model", "gpt-17"), 2, "unknown model 'gpt-17'")
    assert_clean_failure(*cli("score", "--task", "nope", "--predictions", "x.jsonl"), 2, "unknown task")


def _copy_data(tmp_path):
    dst = tmp_path / "data"
    shutil.copytree(data.data_dir(), dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_dataset_not_built(cli, tmp_path, tiny_model):
    dst = _copy_data(tmp_path)
    (dst / "econnli" / "test.jsonl").unlink()
    rc, out, err = cli("run", "--model", tiny_model, "--task", "econnli-zero", "--limit", "1",
                       env={"ECONEVAL_DATA_DIR": str(dst)})
    assert_clean_failure(rc, out, err, 1, "not built", "econeval data build econnli")


def test_dataset_failing_its_hash(cli, tmp_path, tiny_model):
    dst = _copy_data(tmp_path)
    p = dst / "econnli" / "test.jsonl"
    p.write_bytes(p.read_bytes().replace(b'"label":1', b'"label":0', 1))
    env = {"ECONEVAL_DATA_DIR": str(dst)}
    assert_clean_failure(*cli("run", "--model", tiny_model, "--task", "econnli-zero", "--limit", "1", env=env),
                         1, "does not match its manifest")
    rc, out, err = cli("data", "verify", env=env)
    assert rc == 1 and "econnli/test.jsonl: mismatch" in err


@pytest.mark.parametrize("content,needle", [
    ('{"id": "econnli/test/0", "response": "Yes"}\n{not json\n', "pred.jsonl:2: not valid JSON"),
    ('{"id": "econnli/test/999999", "response": "Yes"}\n', "unknown id 'econnli/test/999999'"),
    ('{"id": "econnli/test/0"}\n', "needs a string field 'response'"),
    ('[1, 2]\n', "each line must be a JSON object"),
    ('{"id": "econnli/test/0", "response": "Yes"}\n{"id": "econnli/test/0", "response": "No"}\n', "appears twice"),
    ('', "holds no predictions"),
])
def test_malformed_predictions(cli, tmp_path, content, needle):
    p = tmp_path / "pred.jsonl"
    p.write_text(content)
    assert_clean_failure(*cli("score", "--task", "econnli-zero", "--predictions", p), 2, needle)


def test_missing_predictions_file(cli, tmp_path):
    assert_clean_failure(*cli("score", "--task", "econnli-zero", "--predictions", tmp_path / "none.jsonl"), 2, "cannot read")


def test_unknown_key_in_registry(cli, tmp_path):
    reg = tmp_path / "models.toml"
    reg.write_text('[models.x]\npath = "x.gguf"\ncolour = "blue"\n')
    assert_clean_failure(*cli("models", "list", env={"ECONEVAL_MODELS": str(reg)}), 2, "backend llamacpp has no option 'colour'")


def test_debug_shows_the_traceback(cli, tmp_path):
    rc, out, err = cli("--debug", "run", "--model", tmp_path / "nope.gguf")
    assert rc != 0 and "Traceback" in err


def test_usage_error_exit_code(cli):
    rc, out, err = cli("run", "--limit", "zero")
    assert rc == 2 and "Traceback" not in err


def test_a_near_miss_name_gets_a_did_you_mean(cli, tmp_path):
    assert_clean_failure(*cli("run", "--task", "econnli-zer0", "--out", tmp_path / "a"), 2, "did you mean 'econnli-zero'")
    assert_clean_failure(*cli("run", "--suite", "econlogic", "--out", tmp_path / "b"), 2, "did you mean 'econlogicqa'")
    assert_clean_failure(*cli("run", "--model", "gemma3-207m", "--out", tmp_path / "c"), 2, "did you mean 'gemma3-270m'")
