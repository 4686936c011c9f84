"""Entries by id, slug or a prefix of either; "did you mean" for ids, slugs, targets and
knob names (issue 29)."""

from __future__ import annotations


def _record(ledger, story, knob, value, title):
    r = ledger(*story.args("record", "knob", "decode", f"{knob}={value}", "--class", "perf",
                           "--title", title))
    assert r.exit_code == 0, r.stderr
    return [e for e in ledger(*story.args("list", "--json")).json() if e["title"] == title][0]


def test_a_unique_slug_prefix_finds_the_entry_and_a_shared_one_is_refused(story, ledger):
    ctas = _record(ledger, story, "SGLANG_SM120_MMA_TARGET_CTAS", "512", "ctas wave fix")
    queue = _record(ledger, story, "SGLANG_DISAGGREGATION_QUEUE_SIZE", "8", "ctas queue depth")
    r = ledger(*story.args("show", "ctas-w", "--json"))
    assert r.exit_code == 0 and r.json()["id"] == ctas["id"]
    r = ledger(*story.args("show", "ctas"))
    assert r.exit_code == 1
    assert "'ctas' is ambiguous" in r.stderr
    for e in (ctas, queue):  # each candidate named, with a way to pick one
        assert f"{e['id']} ({e['slug']}: {e['title']})" in r.stderr
    assert "give more of the id or the whole slug" in r.stderr
    # A prefix changes nothing: `revert ctas` refuses before any change.
    before = story.script.read_bytes()
    assert ledger(*story.args("revert", "ctas", "--why", "x")).exit_code == 1
    assert story.script.read_bytes() == before


def test_a_mistyped_id_or_slug_gets_a_did_you_mean(story, ledger):
    e = _record(ledger, story, "SGLANG_SM120_MMA_TARGET_CTAS", "512", "ctas wave fix")
    r = ledger(*story.args("show", "ctas-wave-fxi"))
    assert r.exit_code == 1
    assert f"no entry matches 'ctas-wave-fxi' (did you mean ctas-wave-fix ({e['id']})?" \
        in r.stderr
    typo = e["id"][:-1] + ("0" if e["id"][-1] != "0" else "1")
    r = ledger(*story.args("suspect", typo, "--why", "x"))
    assert r.exit_code == 1 and f"did you mean {e['id']} (ctas-wave-fix)?" in r.stderr
    r = ledger(*story.args("show", "zzzz-nothing-like-it"))
    assert r.exit_code == 1 and "did you mean" not in r.stderr


def test_a_mistyped_target_or_knob_gets_a_did_you_mean(story, ledger):
    r = ledger(*story.args("record", "knob", "Decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
                           "--class", "perf", "--title", "t"))
    assert r.exit_code == 1
    assert "no target named 'Decode' (did you mean decode?" in r.stderr
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTA=512",
                           "--class", "perf", "--title", "t", "--dry-run"))
    assert "unknown knob SGLANG_SM120_MMA_TARGET_CTA (closest known: " \
           "SGLANG_SM120_MMA_TARGET_CTAS" in r.stderr


def test_a_knob_or_flag_the_file_lacks_names_the_close_one_it_has(story, ledger):
    """The catalogs know the engines' names; the file knows the operator's: a case slip,
    a dropped letter or a custom knob the catalogs never heard of."""
    text = story.script.read_text().replace(
        "export SGLANG_DISAGGREGATION_QUEUE_SIZE=4",
        "export SGLANG_DISAGGREGATION_QUEUE_SIZE=4\nexport MY_SITE_BATCH_LIMIT=8")
    story.script.write_text(text)
    before = story.script.read_bytes()
    # Unsetting a name the file lacks changes nothing: refused, naming the close one.
    r = ledger(*story.args("record", "knob", "decode", "MY_SITE_BATCH_LIMT", "--unset",
                           "--class", "perf", "--title", "t"))
    assert r.exit_code == 1
    assert ("MY_SITE_BATCH_LIMT in decode is already unset (did you mean MY_SITE_BATCH_LIMIT "
            "(line 6)?)") in r.stderr, r.stderr
    # Setting one warns (a new line is what it would add), case slips and flags too.
    for typed, meant in (("my_site_batch_limit=4", "MY_SITE_BATCH_LIMIT (line 6)"),
                         ("SGLANG_SM120_MMA_TARGET_CTA=512",
                          "SGLANG_SM120_MMA_TARGET_CTAS (line 7)"),
                         ("--disagregation-mode=prefill", "--disaggregation-mode (line 11)")):
        sub = ("flag", "decode", typed) if typed.startswith("--") else ("knob", "decode", typed)
        r = ledger(*story.args("record", *sub, "--class", "perf", "--title", "t", "--dry-run"))
        assert r.exit_code == 0, r.stderr
        name = typed.split("=")[0]
        assert f"warning: {name} is not in decode (did you mean {meant}?): recording it adds " \
               "a new one" in r.stderr, r.stderr
    # A name the file holds, or one far from all of them, gets no such line.
    for typed in ("MY_SITE_BATCH_LIMIT=4", "SGLANG_ENABLE_TORCH_COMPILE=1"):
        r = ledger(*story.args("record", "knob", "decode", typed, "--class", "perf",
                               "--title", "t", "--dry-run"))
        assert r.exit_code == 0 and "did you mean" not in r.stderr, r.stderr
    assert story.script.read_bytes() == before
