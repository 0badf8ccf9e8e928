"""The selection a run executes (selection.py): the flags it comes from, and a shard of a sample
reporting as the sample does."""

import json

import pytest

from econeval.errors import UsageError
from econeval.run.selection import Full, Limit, Ordered, Shard, StratifiedSample, from_flags


def test_flags_name_one_selection_and_refuse_what_cannot_be_one():
    assert isinstance(from_flags(), Full) and from_flags(limit=3).limit == 3
    assert isinstance(from_flags(sample="0.5"), StratifiedSample) and isinstance(from_flags(budget="10m"), Ordered)
    shard = from_flags(limit=2, shard=(2, 3))
    assert isinstance(shard, Shard) and shard.limit == 2 and [shard.owns(c) for c in range(6)] == [False, True, False] * 2
    for kw, says in (({"limit": 2, "sample": 5}, "--sample and --limit"), ({"budget": "1m", "limit": 2}, "--budget with"),
                     ({"budget": "1m", "shard": (1, 2)}, "--shard with --budget"), ({"sample": "inf"}, "--sample"),
                     ({"budget": "soon"}, "--budget")):
        with pytest.raises(UsageError, match=says):
            from_flags(**kw)


def test_a_shard_of_a_sample_reports_as_the_sample(cli, tmp_path):
    rc, _, err = cli("run", "--model", "fake:s", "-t", "econlogicqa-1shot", "--sample", "20", "--shard", "1/2",
                     "--bootstrap", "50", "--quiet", "--out", tmp_path / "run")
    assert rc == 0, err
    doc = json.loads((tmp_path / "run" / "shard-1-of-2" / "results-sample-20.json").read_text())
    res = doc["tasks"]["econlogicqa-1shot"]
    assert doc["sample"] == 20 and res["estimate"]["of"] == 130 and "finite-population" in res["intervals"]["method"]


@pytest.mark.parametrize("make,says", [
    (lambda: {"selection": Limit(-5)}, "Limit(-5)"), (lambda: {"selection": Limit(0)}, "Limit(0)"),
    (lambda: {"selection": Limit(2.5)}, "Limit(2.5)"), (lambda: {"selection": Shard(Full(), 3, 2)}, "shard 3 of 2"),
    (lambda: {"selection": Shard(Full(), 0, 2)}, "shard 0 of 2"),
    (lambda: {"selection": Shard(Ordered("nested"), 1, 2)}, "a shard is of"),
    (lambda: {"selection": StratifiedSample(5.0)}, "StratifiedSample(5.0)"),
    (lambda: {"selection": StratifiedSample(-1)}, "StratifiedSample(-1)"),
    (lambda: {"selection": 5}, "a Selection"),
    (lambda: {"seed": 1.5}, "seed 1.5"), (lambda: {"seed": 2**64}, "seed 18446744073709551616"), (lambda: {"seed": -1}, "seed -1"),
    (lambda: {"seed": True}, "seed True"), (lambda: {"bootstrap": -5}, "bootstrap -5")])
def test_the_python_api_refuses_what_the_command_line_would_before_writing(tmp_path, make, says):
    """Issue #56 item 6: Limit(-5) ran 1,021 items, a Shard with k > n ran nothing, StratifiedSample(5.0)
    ran everything, seed=1.5 wrote a folder econeval then refused and seed=2**64 a half-written one.
    Each is one UsageError naming the value, and no folder is written."""
    import econeval

    out = tmp_path / "run"
    with pytest.raises(UsageError) as caught:
        econeval.evaluate("fake:a", ["econnli-zero"], out=out, **make())
    assert says in str(caught.value)
    assert not out.exists()
