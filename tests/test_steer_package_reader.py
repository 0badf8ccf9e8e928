"""The reader of the authors' STEER-ME data package refuses malformed rows, a FIFO and a non-UTF-8 table."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _package(root: Path, **change):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    root.mkdir()
    (root / "elements.csv").write_text("element,setting,module\nlinear_system_eq,Foundations,Systems\n")
    row = dict(element="linear_system_eq", base_id="0", part=0, question_text="Solve x + 1 = 3. What is x?",
               options=["1", "2", "3", "4"], correct_index=1, grading="answer", type="standard", domain="shopping",
               perspective="second person", template_id="t0", consistency_rule=None)
    row.update(change)
    where = root / "data" / "linear_system_eq"
    where.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row]), where / "test.parquet")
    return root


@pytest.mark.parametrize("change", [
    {"part": "one"}, {"correct_index": "b"}, {"options": None}, {"question_text": None},
    {"options": [str(i) for i in range(100_000)]}, {"options": "ABCD"},
    {"grading": "consistency", "correct_index": None, "consistency_rule": "r1:9x"},
    {"grading": "sometimes"},
])
def test_the_steer_me_package_reader_refuses_malformed_rows(cli, tmp_path, change):
    pkg = _package(tmp_path / "pkg", **change)
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "-T", f"questions={pkg}", "-q", "--out", tmp_path / "r")
    assert rc == 2 and "internal error" not in err and "Traceback" not in err, err


def test_the_steer_me_package_reader_refuses_a_fifo_and_a_non_utf8_table(cli, tmp_path):
    pkg = _package(tmp_path / "pkg")
    (pkg / "data" / "linear_system_eq" / "test.parquet").unlink()
    os.mkfifo(pkg / "data" / "linear_system_eq" / "test.parquet")
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "-T", f"questions={pkg}", "-q", "--out", tmp_path / "r")
    assert rc == 2 and "not a regular file" in err
    pkg2 = _package(tmp_path / "pkg2")
    (pkg2 / "elements.csv").write_bytes(b"element,setting\n\xff\xfe,x\n")
    rc, _, err = cli("run", "--model", "fake:a", "--task", "steer-me", "-T", f"questions={pkg2}", "-q", "--out", tmp_path / "r2")
    assert rc == 2 and "internal error" not in err
