"""The suite's own machinery (tests/conftest.py): slow modules first, the long profile."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import hypothesis
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from tests import conftest


@dataclass
class Item:
    nodeid: str
    slow: bool = False
    obj: Any = None
    minutes: float | None = None  # slow(minutes=N)

    def iter_markers(self, name: str):
        if name != "slow" or not self.slow:
            return iter(())
        mark = pytest.mark.slow if self.minutes is None else pytest.mark.slow(
            minutes=self.minutes)
        return iter([mark.mark])


def test_modules_with_a_slow_test_come_first_in_their_own_order():
    items = [Item("tests/a.py::t1"), Item("tests/b.py::t1"), Item("tests/b.py::t2", slow=True),
             Item("tests/a.py::t2"), Item("tests/c.py::t1", slow=True)]
    conftest.pytest_collection_modifyitems(items)
    assert [i.nodeid for i in items] == ["tests/b.py::t1", "tests/b.py::t2", "tests/c.py::t1",
                                         "tests/a.py::t1", "tests/a.py::t2"]


def test_the_longest_slow_modules_come_first():
    items = [Item("tests/a.py::t1", slow=True), Item("tests/b.py::t1"),
             Item("tests/c.py::t1", slow=True, minutes=6.5), Item("tests/d.py::t1"),
             Item("tests/d.py::t2", slow=True, minutes=3), Item("tests/c.py::t2")]
    conftest.pytest_collection_modifyitems(items)
    assert [i.nodeid for i in items] == ["tests/c.py::t1", "tests/c.py::t2", "tests/d.py::t1",
                                         "tests/d.py::t2", "tests/a.py::t1", "tests/b.py::t1"]


def test_the_long_profile_multiplies_each_property_tests_own_count(monkeypatch):
    @settings(max_examples=7)
    @given(st.integers())
    def own(x):
        pass

    @given(st.integers())
    def default(x):
        pass

    monkeypatch.setattr(conftest, "PROFILE", "long")
    conftest.pytest_collection_modifyitems([Item("p.py::own", obj=own),
                                            Item("p.py::default", obj=default)])
    assert own._hypothesis_internal_use_settings.max_examples == 7 * conftest.LONG_FACTOR
    # no count of its own: the loaded profile's default, not multiplied again
    assert default._hypothesis_internal_use_settings.max_examples == \
        hypothesis.settings.default.max_examples


def test_the_long_profile_multiplies_a_parametrized_test_once(monkeypatch):
    """The items of a parametrized test share its function: one scaling, not one each."""
    @settings(max_examples=7)
    @given(st.integers())
    def each(case, x):
        pass

    monkeypatch.setattr(conftest, "PROFILE", "long")
    conftest.pytest_collection_modifyitems([Item(f"p.py::each[{c}]", obj=each)
                                            for c in ("a", "b", "c")])
    assert each._hypothesis_internal_use_settings.max_examples == 7 * conftest.LONG_FACTOR
