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
from envknobs.formats.common.argstring import owner
from envknobs.formats.common.argstring import put_back_in
from envknobs.formats.common.argstring import remove_in
from envknobs.formats.common.argstring import set_in
from envknobs.formats.common.word_edit import put_back
from envknobs.formats.common.word_edit import removal_span
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
from envknobs.formats.systemd.container import assignment_of
from envknobs.formats.systemd.container import env_knobs
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
        launch = ex.launch_of(svc)
        flags = ex.flag_values(launch) if launch is not None and launch.shape else {}
        strings = ex.launch_strings(launch)
        env = {k: v for k, v in env_values(svc).items() if k not in strings}
        return {**env_knobs(svc, launch, env), **flags}

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
        from envknobs.formats.common.launch import flag_lookup

        launch = ex.launch_of(_read(text))
        flag = flag_lookup(launch.engine if launch else None)(knob)
        return flag.name if flag is not None else canonical_flag(knob)  # type: ignore[attr-defined]

    def outside_notes(self, text: str, path: str | None = None) -> list[str]:
        """Each ``EnvironmentFile=`` and the knobs it gives (they win over Environment=);
        with the unit's ``path``, each drop-in and what it overrides (:mod:`.dropins`)."""
        from envknobs.formats.systemd.dropins import drop_in_notes
        from envknobs.formats.systemd.envfiles import env_file_notes

        svc = _read(text)
        words = [w.text for c in svc.commands for w in c.words]
        expanded = frozenset(w[1:] for w in words if w.startswith("$") and w[1:2] != "{")
        return env_file_notes(svc, self.read, expanded) + (drop_in_notes(path) if path else [])

    def refuse_outside(self, path: str, text: str, knobs: Sequence[str]) -> None:
        """FormatError naming the drop-in line that overrides an edit of ``knobs``; a flag
        in a string of flags also counts as an edit of the string's variable."""
        from envknobs.formats.systemd.dropins import refuse_overridden

        launch = ex.launch_of(_read(text))
        checked: list[tuple[str, bool]] = []
        for knob in knobs:
            flag = is_flag_name(knob)
            checked.append((knob, flag))
            if flag and launch is not None and launch.shape is not None:
                held, _ = ex.holders(launch, self.canonical(text, knob))
                checked += [(s.name, False) for s, _ in held]
        refuse_overridden(path, checked, self.read)

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
            if before.get(knob) == value and knob not in _spread(text):
                return text
            out = self._flag(text, knob, value, source)
        else:
            check_assignment_args(knob, value)
            svc = _read(text)
            present = knob in svc.env or knob in before
            if before.get(knob) == value and (value is not None or not present):
                return text
            self._refuse_env(text, svc, knob)
            name = assignment_of(svc, ex.launch_of(svc), knob)  # APPTAINERENV_K under apptainer
            out = self._env(text, svc, name, value, source)
        return verified(before, self.parse(out), knob, value, out)

    def _flag(self, text: str, knob: str, value: str | None, source: str | None) -> str:
        from envknobs.formats.common.launch import flag_lookup

        launch = ex.the_launch(_read(text), text)
        own = _string_owner(text, launch, knob)
        if own is not None:
            refuse_shadowed(_read(text), own[0].name, self.read)
            return _in_string(text, own, knob, value, flag_lookup(launch.engine)(knob))
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
        launch = ex.launch_of(svc)
        if launch is not None and launch.shape is not None and launch.shape.docker:
            assignment_of(svc, launch, knob)  # refused unless an assignment reaches it
        _refuse_prefix(launch, knob)
        _refuse_string(launch, knob)
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
        launch = ex.launch_of(svc)
        if not is_flag_name(knob):
            try:
                a = svc.env.get(assignment_of(svc, launch, knob))  # APPTAINERENV_K
            except FormatError:
                return None
            return text[a.word.start : a.word.end] if a is not None else None
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
    svc = _read(text)
    if str(anchor.get("container", "")).startswith("string "):
        out = put_back_in(text, list(ex.launch_strings(ex.launch_of(svc)).values()), anchor)
        if out is not None and e.value is not None:  # the words removed held another value
            out = _in_string_value(fmt, out, knob, e.value)
    else:
        span = container_span(text, svc, str(anchor.get("container", "")))
        out = put_back(text, span, anchor) if span is not None else None
    if out is None:
        return None
    try:
        expected = {**fmt.parse(text), knob: e.value}
        return out if fmt.parse(out) == expected else None
    except FormatError:
        return None


def _spread(text: str) -> set[str]:
    launch = ex.launch_of(_read(text))
    return ex.spread(launch) if launch is not None and launch.shape else set()


def _string_owner(text: str, launch: ex.Launch, knob: str):
    """(string, use) where ``knob`` is only in one string of flags; None where it is in
    none; StringFlagConflict naming every place where more than one could set it."""
    held, on_command = ex.holders(launch, knob)
    elsewhere = [(line_of(text, launch.word(u.word).start), "on ExecStart=") for u in on_command]
    return owner(knob, held, elsewhere, text)


def _in_string(text: str, own, knob: str, value: str | None, flag) -> str:
    s, use = own
    return remove_in(text, s, use) if value is None else set_in(text, s, use, knob, value, flag)


def _refuse_string(launch: ex.Launch | None, knob: str) -> None:
    s = ex.launch_strings(launch).get(knob)
    if s is not None:
        raise FormatError(f"{s.where}: {knob} holds the command's flags, which are knobs of "
                          f"their own: record them as flags (ledger record flag TARGET --FLAG=V)")


def _in_string_value(fmt: SystemdFormat, text: str, knob: str, value: str) -> str | None:
    try:
        return fmt._edit(text, knob, value)
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
