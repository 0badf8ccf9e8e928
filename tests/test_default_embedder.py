"""The real default embedder (m3e-small exported to ONNX by tools/build_embedder.sh)."""

from dataclasses import replace

import pytest

from econeval.backends.onnx_embed import OnnxEmbedder
from econeval.config import load_registry

from conftest import REAL_CACHE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def m3e():
    path = REAL_CACHE / "embedders" / "m3e-small"  # where models.toml's "{cache}" entry points
    if not (path / "model.onnx").is_file():
        pytest.skip("m3e-small is not built (tools/build_embedder.sh)")
    spec = load_registry().embedders["m3e-small"]
    return OnnxEmbedder(replace(spec, options={**spec.options, "path": str(path)}))


def test_identical_texts_score_one_and_paraphrase_beats_unrelated(m3e):
    a = "公司营业收入同比增长15%，净利润大幅提升。"
    para = "该公司的营收比去年同期增加了百分之十五，利润明显上升。"
    unrelated = "今天天气晴朗，适合去公园散步和野餐。"
    v = m3e.embed([a, a, para, unrelated])
    assert v.shape == (4, 512)
    assert v[0] @ v[1] == pytest.approx(1.0, abs=1e-5)
    assert v[0] @ v[2] > v[0] @ v[3] + 0.05


def test_long_inputs_are_truncated_not_fatal(m3e):
    v = m3e.embed(["风险提示：" + "市场竞争加剧，" * 400])
    assert v.shape == (1, 512)
    d = m3e.info().model
    assert d["pooling"] == "mean" and "non-commercial" in d["licence"] and len(d["sha256"]) == 64
