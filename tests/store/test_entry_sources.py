"""Value sources survive entries.yaml exactly: blanks, line breaks, quotes, comments' neighbours."""

from __future__ import annotations

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ledger.core.model import Entry
from ledger.store.entries_file import entries_bytes
from ledger.store.entries_file import parse_entries

SOURCES = [" $HF_TOKEN", "   '512'", ' "a\\tb"', "", " ", " >-\n    decode\n    server",
           " first\n    second", " 'it''s'", " ~"]
texts = st.one_of(st.sampled_from(SOURCES),
                  st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"),
                          max_size=30))


@settings(max_examples=80, derandomize=True, deadline=None)
@given(texts, st.one_of(st.none(), texts))
def test_sources_round_trip_through_entries_yaml(before: str, after: str | None) -> None:
    e = Entry(id="e0001", seq=1, kind="knob", cls="perf", title="t", slug="t",
              recorded="2026-12-02T16:01:02Z", target="k8s", knob="cuda-graph-max-bs",
              before="1", after="2", before_source=before, after_source=after,
              before_lines=after, after_lines=before)
    back = parse_entries(entries_bytes([e]).decode(), "entries.yaml")
    assert back == [e]
