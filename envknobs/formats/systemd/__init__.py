"""The ``systemd`` target format: a service unit's ``Environment=`` knobs and ``ExecStart=`` flags.

Reading follows systemd's own rules (checked in the tests against ``systemd-analyze
verify``, which dumps what systemd parsed): lines and words in :mod:`.unit`, what the
``[Service]`` section gives the process in :mod:`.service`, the launch and its flags in
:mod:`.execstart` (the bash format's launch reader, with systemd's ``$``/``${}``
rules, see :mod:`.words`).  ``parse`` returns the effective literal ``Environment=``
assignments, then the flags of the one ``ExecStart=`` command.

Writing, each edit re-read and verified, bytes outside the change untouched:

* an existing assignment is rewritten in its own word, keeping how it is quoted
  (``"K=V"``, ``K="V"``, bare); the last assignment is the one that counts and is
  edited (systemd's rule), ``unset`` removes every assignment after the last reset,
  with the whole line when it is the line's only word (an emptied ``Environment=``
  would reset the others);
* a new knob is a line ``Environment=K=V`` (``Environment="K=V"`` where the unit's
  words are quoted so) after the last ``Environment=`` line, else before
  ``ExecStart=``, else right after ``[Service]``;
* refused, naming the line: a knob that ``UnsetEnvironment=`` removes, one set by an
  ``EnvironmentFile=`` (it wins: :mod:`.envfiles`) or by the command itself
  (``/usr/bin/env K=V vllm ...``), a value with a specifier, and every env edit of a
  unit whose command is ``docker run``/``podman run`` (its ``Environment=`` reaches
  the docker client, not the container);
* flags are edited in ``ExecStart=`` (:mod:`.execstart`); a unit with several commands
  (``Type=oneshot``), or one the reader does not recognise, is refused for flags, and so
  is a change of a flag followed by a word systemd computes (``$OPTS``, ``${OPTS}``:
  it may set the flag again); a new flag goes last, where it wins.

Places: each knob has one place; an assignment among others on its line and a flag
carry an ``anchor`` (the bash format's: the removed text and its context), so that a
revert or restore puts a removed word back where it was, byte for byte
(:meth:`SystemdFormat.edit_places`).
"""

from __future__ import annotations

from typing import Sequence

from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.formats.bash.edit import anchor_of
from envknobs.formats.bash.edit import put_back
from envknobs.formats.bash.edit import removal_span
from envknobs.formats.common import FormatError
from envknobs.formats.common import TargetFormat
from envknobs.formats.common.places import KnobSummary
from envknobs.formats.common.places import PlaceEdit
from envknobs.formats.common.places import Summary
from envknobs.formats.common.text import check_assignment_args
from envknobs.formats.common.text import insert_line
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import remove_lines
from envknobs.formats.common.text import verified
from envknobs.formats.systemd import execstart as ex
from envknobs.formats.systemd.envfiles import Reader
from envknobs.formats.systemd.envfiles import refuse_shadowed
from envknobs.formats.systemd.service import Assignment
from envknobs.formats.systemd.service import Service
from envknobs.formats.systemd.service import env_values
from envknobs.formats.systemd.service import read_service
from envknobs.formats.systemd.unit import logical_lines
from envknobs.formats.systemd.unit import split_words
from envknobs.formats.systemd.words import render_env_word
from envknobs.registry import check_knob_value

__all__ = ["SystemdFormat"]


def _read(text: str) -> Service:
    svc = read_service(text)
    if not svc.has_section:
        raise FormatError("no [Service] section: this is not a systemd service unit "
                          "(a dotenv file or a script is --format dotenv / bash)")
    return svc


def _launch(svc: Service) -> ex.Launch | None:
    if len(svc.commands) != 1 or svc.commands[0].error is not None:
        return None
    return ex.read_launch(svc.commands[0])


def _style(text: str, a: Assignment) -> str:
    raw = text[a.word.start : a.word.end]
    if raw[:1] in "'\"":
        return raw[0] + "word"
    after = raw.partition("=")[2]
    return after[0] + "value" if after[:1] in "'\"" else ""


class SystemdFormat(TargetFormat):
    """A systemd service unit; see the module docstring."""

    name = "systemd"

    def __init__(self, read: Reader) -> None:
        self.read = read  # how an EnvironmentFile='s knobs are read (:func:`.file_reader`)

    # -- reading ----------------------------------------------------------------------
    def parse(self, text: str) -> dict[str, str]:
        """Env knob -> value (``Environment=``, literal ones), then flag -> value."""
        svc = _read(text)
        launch = _launch(svc)
        flags = ex.flag_values(launch) if launch is not None and launch.shape else {}
        return {**env_values(svc), **flags}

    def summary(self, text: str) -> Summary:
        """Each knob and flag with its line; the command; what the ledger cannot see."""
        from envknobs.formats.systemd.places import summarize

        return summarize(text, _read(text))

    def knob(self, text: str, knob: str) -> KnobSummary | None:
        return self.summary(text).get(self.canonical(text, knob))

    def canonical(self, text: str, knob: str) -> str:
        """A flag as the command's engine catalog spells it (``--tp`` -> ``--tp-size``)."""
        if not is_flag_name(knob):
            return knob
        from envknobs.flags import canonical_flag
        from envknobs.formats.bash.analysis import flag_lookup

        launch = _launch(_read(text))
        flag = flag_lookup(launch.engine if launch else None)(knob)
        return flag.name if flag is not None else canonical_flag(knob)  # type: ignore[attr-defined]

    def outside_notes(self, text: str) -> list[str]:
        """Each ``EnvironmentFile=`` and the knobs it gives (they win over Environment=)."""
        from envknobs.formats.systemd.envfiles import env_file_notes

        return env_file_notes(_read(text), self.read)

    # -- writing ----------------------------------------------------------------------
    def set(self, text: str, knob: str, value: str, source: str | None = None) -> str:
        """Set ``knob`` (see the module docstring); FormatError where it would not take
        effect or cannot be written, KnobError for a bad name or value.  ``source``: the
        exact text to write (:meth:`source`), used where it reads back as ``value``."""
        return self._edit(text, knob, value, source)

    def unset(self, text: str, knob: str) -> str:
        """Remove ``knob`` (same text when the unit does not set it)."""
        return self._edit(text, knob, None)

    def _edit(self, text: str, knob: str, value: str | None, source: str | None = None) -> str:
        before = self.parse(text)
        if is_flag_name(knob):
            check_flag_name(knob)
            if value is not None:
                check_knob_value(value)
            knob = self.canonical(text, knob)
            if before.get(knob) == value:
                return text
            out = self._flag(text, knob, value, source)
        else:
            check_assignment_args(knob, value)
            svc = _read(text)
            present = knob in svc.env or knob in before
            if before.get(knob) == value and (value is not None or not present):
                return text
            self._refuse_env(text, svc, knob)
            out = self._env(text, svc, knob, value, source)
        return verified(before, self.parse(out), knob, value, out)

    def _flag(self, text: str, knob: str, value: str | None, source: str | None) -> str:
        from envknobs.formats.bash.analysis import flag_lookup

        launch = ex.the_launch(_read(text), text)
        ex.refuse_opaque_after(launch, knob)
        if value is None:
            return ex.unset_flag(text, launch, knob)
        if source is not None:
            exact = self._try_source(text, launch, knob, value, source)
            if exact is not None:
                return exact
        return ex.set_flag(text, launch, knob, value, flag_lookup(launch.engine)(knob))

    def _try_source(self, text, launch, knob, value, source) -> str | None:
        uses = [u for u in launch.uses if u.knob == knob]
        if not uses or uses[-1].form != "space" or len(uses[-1].values) != 1:
            return None
        w = launch.word(uses[-1].values[0])
        out = text[: w.start] + source + text[w.end :]
        try:
            return out if self.parse(out).get(knob) == value else None
        except FormatError:
            return None

    def _refuse_env(self, text: str, svc: Service, knob: str) -> None:
        if knob in svc.unset:
            raise FormatError(f"line {svc.unset[knob]}: UnsetEnvironment= removes {knob} from "
                              "the service's environment: a value set here takes no effect")
        launch = _launch(svc)
        if launch is not None and launch.shape is not None and launch.shape.docker:
            raise FormatError(
                f"line {launch.command.directive.line}: ExecStart= runs docker/podman "
                f"run: Environment= reaches the docker client, not the container; set "
                f"{knob} with -e on that line by hand")
        _refuse_prefix(launch, knob)
        a = svc.env.get(knob)
        if a is not None and a.value is None:
            raise FormatError(f"line {line_of(text, a.word.start)}: {knob} holds a specifier "
                              f"({text[a.word.start:a.word.end]}); edit it by hand")
        refuse_shadowed(svc, knob, self.read)

    def _env(self, text: str, svc: Service, knob: str, value: str | None,
             source: str | None) -> str:
        if value is None:
            return _remove_assignments(text, svc, knob)
        a = svc.env.get(knob)
        if a is not None:
            if source is not None:
                exact = text[: a.word.start] + source + text[a.word.end :]
                if _reads(exact, knob, value):
                    return exact
            return text[: a.word.start] + render_env_word(knob, value, _style(text, a)) + \
                text[a.word.end :]
        word = source if source is not None and _reads_word(source, knob, value) else None
        return _add_line(text, svc, word or render_env_word(knob, value, _new_style(text, svc)))

    # -- exact sources ----------------------------------------------------------------
    def source(self, text: str, knob: str) -> str | None:
        """The exact text of an assignment word, or of a flag's separate value word."""
        try:
            svc = _read(text)
        except FormatError:
            return None
        if not is_flag_name(knob):
            a = svc.env.get(knob)
            return text[a.word.start : a.word.end] if a is not None else None
        launch = _launch(svc)
        uses = [u for u in launch.uses if u.knob == knob] if launch else []
        if not uses or uses[-1].form != "space" or len(uses[-1].values) != 1:
            return None
        w = launch.word(uses[-1].values[0])  # type: ignore[union-attr]
        return text[w.start : w.end]

    def set_exact(self, text: str, knob: str, value: str, source: str | None) -> str:
        return self.set(text, knob, value, source)

    # -- places -----------------------------------------------------------------------
    def edit_places(self, text: str, knob: str, edits: Sequence[PlaceEdit]) -> str:
        """Each place by key: set, unset, or (absent, with an anchor) put back exactly
        where it was removed; without a usable anchor an absent knob is added anew."""
        for e in edits:
            current = self.knob(text, knob)
            if e.value is None or current is not None:
                text = self._edit(text, knob, e.value)
                continue
            back = _put_back(self, text, knob, e)
            text = back if back is not None else self._edit(text, knob, e.value)
        return text


def _refuse_prefix(launch: ex.Launch | None, knob: str) -> None:
    """FormatError where the command itself sets ``knob`` (``/usr/bin/env K=V vllm ...``):
    that wins over Environment=."""
    if launch is None or launch.shape is None:
        return
    for w in launch.shape.prefixes:
        word = launch.command.words[w.start]
        if word.text.partition("=")[0] == knob:
            raise FormatError(
                f"line {launch.command.directive.line}: ExecStart= sets {word.text} on its "
                f"command (env), which wins over Environment=: a change there would take no "
                "effect; edit that word by hand")


def _put_back(fmt: SystemdFormat, text: str, knob: str, e: PlaceEdit) -> str | None:
    from envknobs.formats.systemd.places import container_span

    anchor = e.anchor or {}
    span = container_span(text, _read(text), str(anchor.get("container", "")))
    out = put_back(text, span, anchor) if span is not None else None
    if out is None:
        return None
    try:
        expected = {**fmt.parse(text), knob: e.value}
        return out if fmt.parse(out) == expected else None
    except FormatError:
        return None


def _reads(text: str, knob: str, value: str) -> bool:
    try:
        return env_values(read_service(text)).get(knob) == value
    except FormatError:
        return False


def _reads_word(word: str, knob: str, value: str) -> bool:
    return _reads(f"[Service]\nEnvironment={word}\n", knob, value)


def _new_style(text: str, svc: Service) -> str:
    words = [a for a in svc.env.values()]
    quoted = sum(_style(text, a) == '"word' for a in words)
    return '"word' if words and quoted * 2 > len(words) else ""


def _add_line(text: str, svc: Service, word: str) -> str:
    """``Environment=WORD`` as a line of its own, after every reset: after the last
    Environment= line, else before ExecStart=, else right after [Service]."""
    if svc.all_env:
        return insert_line(text, svc.all_env[-1].logical.end, f"Environment={word}")
    if svc.exec_lines:
        return insert_line(text, svc.exec_lines[0].logical.start, f"Environment={word}")
    header = [lg for lg in logical_lines(text) if lg.text.strip() == "[Service]"][-1]
    return insert_line(text, header.end, f"Environment={word}")


def _remove_assignments(text: str, svc: Service, knob: str) -> str:
    """Every assignment of ``knob`` after the last reset, its line with it when it is
    the line's only word."""
    cuts: list[tuple[int, int, bool]] = []  # (start, end, whole lines)
    for d in svc.env_lines:
        words = split_words(d, relax=False)
        doomed = [w for w in words if w.error is None and w.text.partition("=")[0] == knob
                  and "=" in w.text]
        if doomed and len(doomed) == len(words):
            cuts.append((d.logical.start, d.logical.end, True))
        else:
            cuts += [(*removal_span(text, w.start, w.end, lines=False), False) for w in doomed]
    for start, end, whole in sorted(cuts, key=lambda c: -c[0]):
        text = remove_lines(text, start, end) if whole else text[:start] + text[end:]
    return text


def anchor_for_word(text: str, words, w, cut, ident: str) -> dict:
    """A word's anchor (see :func:`envknobs.formats.bash.edit.anchor_of`)."""
    previous = [x.start for x in words if x.end <= cut[0]]
    following = [x.end for x in words if x.start >= cut[1]]
    start = max(previous) if previous else cut[0]
    end = min(following) if following else cut[1]
    return {"container": ident, **anchor_of(text, cut, start, end)}

