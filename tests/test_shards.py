"""Runs spread over processes and a real scheduler: `run --shard K/N`, `merge`, byte-identical to
one process; refusals of missing, duplicated, foreign and unfinished shards; --shard auto from
Slurm's and Kubernetes' variables; the shipped Slurm scripts on a single-node Slurm cluster."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow  # several model processes and a real Slurm cluster

ARGS = ("run", "--task", "econnli-zero", "--task", "econlogicqa-1shot", "--task", "steer-me", "--limit", "34",
        "--bootstrap", "200", "--threads", "1", "--quiet")


def _start(args, env):
    return subprocess.Popen([sys.executable, "-m", "econeval", *map(str, args)], cwd=REPO, env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, tiny_model):
    """Three shard processes at once and one single process of the same command."""
    base = tmp_path_factory.mktemp("shards")
    reg = base / "models.toml"
    reg.write_text(f'default = "tiny"\n[models.tiny]\npath = "{tiny_model}"\nn_ctx = 2048\nchat = "off"\n')
    env = {"ECONEVAL_MODELS": str(reg), "ECONEVAL_HOME": str(base / "home")}
    t0 = time.monotonic()
    procs = [_start([*ARGS, "--shard", f"{k}/3", "--out", base / "shards"], env) for k in (1, 2, 3)]
    outs = [p.communicate(timeout=600) for p in procs]
    t_shards = time.monotonic() - t0
    assert all(p.returncode == 0 for p in procs), outs
    t0 = time.monotonic()
    one = _start([*ARGS, "--out", base / "one"], env)
    assert one.wait(timeout=600) == 0, one.communicate()
    t_one = time.monotonic() - t0
    print(f"\n3 shards at once: {t_shards:.1f} s; one process: {t_one:.1f} s")
    return base, env


def _merge(cli, env, out, *folders):
    return cli("merge", *folders, "--out", out, env=env)


def test_three_shards_merge_into_the_single_process_run(cli, sharded):
    base, env = sharded
    shards = sorted((base / "shards").iterdir())
    assert [s.name for s in shards] == ["shard-1-of-3", "shard-2-of-3", "shard-3-of-3"]
    metas = [json.loads((s / "run.json").read_text()) for s in shards]
    assert [m["shard"] for m in metas] == [{"index": k, "count": 3} for k in (1, 2, 3)]
    assert metas[0]["identity"] == metas[1]["identity"] == metas[2]["identity"]
    t0 = time.monotonic()
    rc, _, err = _merge(cli, env, base / "merged", *shards)
    print(f"\nmerge: {time.monotonic() - t0:.1f} s")
    assert rc == 0, err
    one, merged = base / "one", base / "merged"
    assert (merged / "samples.jsonl").read_bytes() == (one / "samples.jsonl").read_bytes()
    assert (merged / "results.json").read_bytes() == (one / "results.json").read_bytes()
    m1, mm = json.loads((one / "run.json").read_text()), json.loads((merged / "run.json").read_text())
    assert mm["identity"] == m1["identity"] and "shard" not in mm and len(mm["merged_from"]) == 3
    for key in set(m1) - {"started", "finished", "timing", "projection", "command", "peak_rss_mb", "merged_from", "backend"}:
        assert mm.get(key) == m1.get(key), key
    # the merged folder is an ordinary run folder: the same command resumes it with nothing to do
    rc, _, err = cli(*ARGS, "--out", merged, env=env)
    assert rc == 0, err
    assert (merged / "samples.jsonl").read_bytes() == (one / "samples.jsonl").read_bytes()
    rc, _, err = cli("compare", one, merged, "--bootstrap", "100", "--max-drop", "0.2", env=env)  # 34 items resolve 0.2
    assert rc == 0, err


def test_bad_shard_sets_are_refused_and_nothing_is_written(cli, sharded, tmp_path):
    base, env = sharded
    s1, s2, s3 = sorted((base / "shards").iterdir())
    foreign = tmp_path / "foreign"
    rc, _, err = cli(*[a if a != "34" else "33" for a in ARGS], "--shard", "3/3", "--out", foreign, env=env)
    assert rc == 0, err
    unfinished = tmp_path / "unfinished"
    shutil.copytree(s3, unfinished)
    meta = json.loads((unfinished / "run.json").read_text())
    meta["status"] = "interrupted"
    (unfinished / "run.json").write_text(json.dumps(meta))
    edited = tmp_path / "edited"  # a scored field changed without its response: merged silently before
    shutil.copytree(s2, edited)
    recs = [json.loads(x) for x in (edited / "samples.jsonl").read_text().splitlines()]
    k = next(i for i, r in enumerate(recs) if isinstance(r.get("correct"), bool))
    recs[k]["correct"] = not recs[k]["correct"]
    (edited / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    for folders, needle in (((s1, edited, s3), "contradicts itself"), ((s1, s2), "shard(s) 3 of 3 are missing"),
                            ((s1, s2, s3, s2), "are both shard 2 of 3"),
                            ((s1, s2, foreign / "shard-3-of-3"), "a shard of another run"),
                            ((s1, s2, unfinished), "interrupted, not complete"), ((s1, base / "one"), "not a shard folder")):
        out = tmp_path / "out"
        rc, _, err = _merge(cli, env, out, *folders)
        assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err
        assert not out.exists()


def test_shard_auto_reads_slurm_and_kubernetes(cli, sharded, tmp_path):
    base, env = sharded
    cases = [({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4", "SLURM_ARRAY_TASK_COUNT": "3"}, (), "shard-2-of-3"),
             ({"JOB_COMPLETION_INDEX": "2"}, ("--shard-count", "3"), "shard-3-of-3")]
    for extra, flags, name in cases:
        out = tmp_path / name
        rc, _, err = cli(*ARGS, "--shard", "auto", *flags, "--out", out, env={**env, **extra})
        assert rc == 0, err
        got = out / name
        assert (got / "samples.jsonl").read_bytes() == (base / "shards" / name / "samples.jsonl").read_bytes()
    rc, _, err = cli(*ARGS, "--shard", "auto", "--out", tmp_path / "x", env={**env, "JOB_COMPLETION_INDEX": "0"})
    assert rc == 2 and "needs --shard-count" in err
    for bad in ("0/3", "4/3", "x", "1/0"):
        rc, _, err = cli(*ARGS, "--shard", bad, "--out", tmp_path / "y", env=env)
        assert rc == 2 and "Traceback" not in err, err
    rc, _, err = cli(*ARGS, "--shard", "1/2", env=env)
    assert rc == 2 and "--shard needs --out" in err
    rc, _, err = cli(*ARGS, "--shard", "1/2", "--shard-count", "5", "--out", tmp_path / "z", env=env)  # was ignored
    assert rc == 2 and "K/N names the count already" in err
    stepped = {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_STEP": "2"}
    rc, _, err = cli(*ARGS, "--shard", "auto", "--out", tmp_path / "w", env={**env, **stepped})  # --array=0-4:2
    assert rc == 2 and "shard 5 of 3 does not exist" in err and "with a step" in err, err


def test_the_kubernetes_manifest_runs_every_index(tmp_path):
    import yaml

    job, merge = list(yaml.safe_load_all((REPO / "tools" / "cluster" / "econeval-indexed-job.yaml").read_text()))
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    cmd = spec["template"]["spec"]["containers"][0]["command"]
    assert cmd[cmd.index("--shard") + 1] == "auto" and int(cmd[cmd.index("--shard-count") + 1]) == spec["completions"]
    out = cmd[cmd.index("--out") + 1]
    assert f"{out}/shard-*" in " ".join(merge["spec"]["template"]["spec"]["containers"][0]["command"])


# ---- a real Slurm cluster on this machine --------------------------------------------------------------
SLURM_CONF = """ClusterName=econeval-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
SlurmctldPort={port}
SlurmdPort={port2}
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=localhost CPUs={cpus} RealMemory=2000 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """munged, slurmctld and slurmd on localhost (Debian's slurm-wlm: tools/system_test_deps.sh
    installs it, CI runs it first); stopped at the end."""
    if not shutil.which("sbatch"):
        pytest.skip("Slurm is not installed (tools/system_test_deps.sh installs slurm-wlm and munge)")
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    import socket

    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    conf = d / "slurm.conf"
    conf.write_text(SLURM_CONF.format(d=d, port=ports[0], port2=ports[1], cpus=os.cpu_count()))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    if not Path("/etc/munge/munge.key").exists():
        Path("/etc/munge").mkdir(exist_ok=True)
        Path("/etc/munge/munge.key").write_bytes(os.urandom(1024))
    for p in ("/run/munge", "/var/lib/munge", "/var/log/munge"):
        Path(p).mkdir(parents=True, exist_ok=True)
    subprocess.run(["chown", "-R", "munge:munge", "/etc/munge", "/run/munge", "/var/lib/munge", "/var/log/munge"])
    os.chmod("/etc/munge/munge.key", 0o400)
    if subprocess.run(["munge", "-n"], capture_output=True).returncode:
        subprocess.run(["runuser", "-u", "munge", "--", "munged"], check=True)
    daemons = [subprocess.Popen([name, "-D"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for name in ("slurmctld", "slurmd")]
    for _ in range(60):
        if "idle" in subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True).stdout:
            break
        time.sleep(0.5)
    else:
        for p in daemons:
            p.kill()
        pytest.fail("slurmctld/slurmd did not come up: " + (d / "slurmctld.log").read_text()[-800:])
    yield env
    subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True)
    for p in daemons:
        p.terminate()
        p.wait(timeout=30)


def test_the_shipped_slurm_scripts_run_and_merge(sharded, slurm, tmp_path):
    base, env = sharded
    out = tmp_path / "slurm-run"
    wrapper = tmp_path / "econeval"
    wrapper.write_text(f"#!/bin/sh\ncd {REPO}\nexec {sys.executable} -m econeval \"$@\"\n")
    wrapper.chmod(0o755)
    job_env = {**slurm, **env, "OUT": str(out), "ECONEVAL": str(wrapper), "ECONEVAL_ARGS": " ".join(ARGS[1:-1])}
    sub = subprocess.run(["sbatch", "--parsable", "--array=0-2", f"--chdir={tmp_path}", "--export=ALL",
                          str(REPO / "tools" / "cluster" / "econeval-shards.sbatch")], env=job_env, capture_output=True, text=True)
    assert sub.returncode == 0, sub.stderr
    jid = sub.stdout.strip().split(";")[0]
    sub = subprocess.run(["sbatch", "--parsable", f"--dependency=afterok:{jid}", f"--chdir={tmp_path}", "--export=ALL",
                          str(REPO / "tools" / "cluster" / "econeval-merge.sbatch")], env=job_env, capture_output=True, text=True)
    assert sub.returncode == 0, sub.stderr
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and subprocess.run(["squeue", "-h"], env=slurm, capture_output=True, text=True).stdout.strip():
        time.sleep(2)
    logs = "".join(p.read_text() for p in tmp_path.glob("econeval-*.log"))
    assert (out / "merged" / "samples.jsonl").is_file(), logs
    assert (out / "merged" / "samples.jsonl").read_bytes() == (base / "one" / "samples.jsonl").read_bytes()
    assert (out / "merged" / "results.json").read_bytes() == (base / "one" / "results.json").read_bytes()


def test_sample_shards_merge_into_the_single_process_sample_and_mixed_shards_are_refused(cli, tmp_path):
    """Issue #33 item 9: `--shard K/N --sample 40` ran but could never be merged ("item … is in no
    shard"); shards run with different --bootstrap merged silently, results.json following the
    order the folders were named."""
    args = ("--model", "fake:m", "--task", "econnli-zero", "--task", "econlogicqa-1shot", "--sample", "40", "--quiet")
    assert cli("run", *args, "--out", tmp_path / "one")[0] == 0
    for k in (1, 2):
        rc, _, err = cli("run", *args, "--shard", f"{k}/2", "--out", tmp_path / "sh")
        assert rc == 0, err
    shards = [tmp_path / "sh" / f"shard-{k}-of-2" for k in (1, 2)]
    rc, _, err = cli("merge", *shards, "--out", tmp_path / "merged")
    assert rc == 0, err
    for name in ("samples.jsonl", "results-sample-40.json"):
        assert (tmp_path / "merged" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
    assert not (tmp_path / "merged" / "results.json").exists()
    meta = json.loads((tmp_path / "merged" / "run.json").read_text())
    assert meta["samples"] == json.loads((tmp_path / "one" / "run.json").read_text())["samples"]
    # a shard with another --bootstrap: refused whichever folder comes first
    base = ("--model", "fake:m", "--task", "econnli-zero", "--limit", "16", "--quiet", "--out", tmp_path / "b")
    assert cli("run", *base, "--shard", "1/2", "--bootstrap", "200")[0] == 0
    assert cli("run", *base, "--shard", "2/2", "--bootstrap", "0")[0] == 0
    for order in ((1, 2), (2, 1)):
        rc, _, err = cli("merge", *(tmp_path / "b" / f"shard-{k}-of-2" for k in order), "--out", tmp_path / "mb")
        assert rc == 2 and "--bootstrap" in err and "cannot be merged" in err, err
        assert not (tmp_path / "mb").exists()


def test_shards_cut_into_other_chunks_are_refused_by_what_differs(cli, tmp_path):
    """Issue #33 item 9: served shards at another --concurrency were refused with "item … is in no shard"."""
    from econeval.run.shards import merge

    base = ("--model", "fake:m", "--task", "econnli-zero", "--limit", "40", "--quiet", "--out", tmp_path / "c")
    for k in (1, 2):
        assert cli("run", *base, "--shard", f"{k}/2")[0] == 0
    second = tmp_path / "c" / "shard-2-of-2" / "run.json"
    meta = json.loads(second.read_text())
    meta["schedule"]["chunk_items"] = 8
    second.write_text(json.dumps(meta))
    with pytest.raises(Exception, match="chunks of 8") as exc:
        merge([tmp_path / "c" / f"shard-{k}-of-2" for k in (1, 2)], tmp_path / "mc")
    assert "--concurrency" in str(exc.value.hint)
