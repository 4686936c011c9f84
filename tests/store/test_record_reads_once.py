"""One ``record knob`` analyses its bash target at most twice: the script as it is, and
the edited script (its verification).  Every other question of the command — the
knob's summary, its canonical name, its places, drift, the anchor, the apply step's own
read — is answered from those two (see envknobs.formats.bash.analysis.analyse)."""

from __future__ import annotations

from envknobs.formats.bash import analysis
from ledger.commands.record import record_knob
from ledger.commands.session import open_session

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


def _count(monkeypatch) -> list[str]:
    texts: list[str] = []
    real = analysis.Analysis.__init__

    def counted(inner, text):
        texts.append(text)
        real(inner, text)

    monkeypatch.setattr(analysis.Analysis, "__init__", counted)
    analysis._ANALYSES.clear()  # nothing from an earlier test or command
    return texts


def test_record_knob_analyses_its_target_at_most_twice(story, monkeypatch):
    before = story.script.read_text()
    texts = _count(monkeypatch)
    s = open_session(str(story.root), "record knob")
    r = record_knob(s, target="decode", knob=KNOB, value="512", cls="perf", title="ctas")
    after = story.script.read_text()
    assert after != before and f"{KNOB}=512" in after
    assert texts == [before, after], [t for t in texts]
    assert r.entry.before == "256" and r.entry.after == "512"


def test_recording_a_flag_and_a_new_knob_also_reads_twice(story, monkeypatch):
    for knob, value in (("--cuda-graph-max-bs", "256"), ("SGLANG_NEW_KNOB", "1")):
        texts = _count(monkeypatch)
        s = open_session(str(story.root), "record knob")
        record_knob(s, target="decode", knob=knob, value=value, cls="perf", title=knob,
                    no_validate=True)
        assert len(texts) <= 2, (knob, len(texts))
