"""History the ledger did not see: real dates, and changes already reverted by hand.

``ledger record knob decode CTAS=512 --class perf --title T --already-reverted`` records
a change that was made and then taken back before the ledger knew of it (a ``sed`` on
the serve script, a ``.bak`` left behind): the entry's base is what the file holds now,
its after is the value given, and its state is ``reverted`` — so ``ledger diff`` shows
it off the table and ``restore --perf-only`` claws it back.  Nothing is written to the
target: the file already holds the base.  ``--suspected`` marks it taken back as a
suspect (``--reverted-why`` is then the hypothesis), held back from restores until
``ledger clear``.

Decisions: the entry's history is an ``adopt`` (the change, made by hand, at ``--when``)
then a ``revert`` or ``suspect`` (at ``--reverted-when``), both recorded now; the
exact lines a restore writes are the ones the format would write for a new knob (a
backup with the original line is ``ledger adopt``'s to bring in).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace

from ledger.core.inversion import inversion
from ledger.core.model import Action
from ledger.core.model import Entry
from ledger.core.when import parse_when
from ledger.errors import Refused
from ledger.errors import UsageError

HAND_REVERT = "reverted by hand before the ledger knew of it"


@dataclass(frozen=True)
class Past:
    """What the operator tells ``record`` about history the ledger did not see."""

    when: str = ""  # when the change was made (raw text until :meth:`checked`)
    already_reverted: bool = False
    reverted_when: str = ""
    reverted_why: str = ""
    suspected: bool = False
    not_a_revert: bool = False  # a perf removal that is itself the change

    def checked(self, now: str, *, adopt: bool, at: object = None) -> "Past":
        """The flags checked together, the times parsed (``--when`` not after now, the
        revert not before the change)."""
        if self.already_reverted and adopt:
            raise UsageError("--already-reverted records a change the file no longer holds; "
                             "--adopt one it holds: give one of them")
        if self.already_reverted and at is not None:
            raise UsageError("--already-reverted records a whole knob; it does not take "
                             "--at/--all")
        if not self.already_reverted and (self.reverted_when or self.reverted_why
                                          or self.suspected):
            raise UsageError("--reverted-when, --reverted-why and --suspected go with "
                             "--already-reverted")
        if self.suspected and not self.reverted_why.strip():
            raise UsageError("--suspected needs --reverted-why: write the hypothesis down")
        when = parse_when(self.when, now) if self.when else ""
        back = parse_when(self.reverted_when, now, "--reverted-when") if self.reverted_when \
            else ""
        if when and back and back < when:
            raise UsageError(f"--reverted-when {back} is before --when {when}: a change is "
                             "reverted after it is made")
        return replace(self, when=when, reverted_when=back)

    def taken_back(self, entry: Entry, *, at: str, command: str) -> Entry:
        """``entry`` as recorded already reverted (or as it is, without the flag)."""
        if not self.already_reverted:
            return entry
        why = self.reverted_why.strip() or HAND_REVERT
        action = Action(at=at, action="suspect" if self.suspected else "revert", why=why,
                        command=command, when=self.reverted_when)
        if self.suspected:
            return entry.with_action(action, state="reverted", suspicion="suspected",
                                     suspect_why=why)
        return entry.with_action(action, state="reverted")


def refuse_inversion(tf, layer, *, knob: str, before: str | None, after: str | None,
                     cls: str, adopt: bool, title: str, past: Past) -> None:
    """Refuse a perf entry whose change is a revert (ledger.core.inversion), naming the
    command that records it right, unless ``--not-a-revert``."""
    if past.not_a_revert or past.already_reverted:
        return
    from ledger.commands.catalog import name_defaults

    default = name_defaults(tf.target.engine, [knob]).get(knob) if adopt else None
    found = inversion(target=tf.target.name, knob=knob, before=before, after=after, cls=cls,
                      adopt=adopt, title=title, layer=layer or (), default=default)
    if found is not None:
        raise Refused(found.message(f"{tf.path}: {knob}"))


def refuse_not_reverted(tf, knob: str, before: str | None, value: str | None) -> None:
    """``--already-reverted`` of a value the file holds now: that is an adopt."""
    if before == value:
        from ledger.values import value_text

        raise Refused(f"{tf.path}: {knob} is {value_text(value, quote=True)} in the file now: "
                      "it is not reverted; record it with --adopt --before V (or "
                      "--before-unset) instead")


__all__ = ["HAND_REVERT", "Past", "refuse_inversion", "refuse_not_reverted"]
