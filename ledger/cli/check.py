"""`ledger check`: parse, run :func:`ledger.commands.check.run_check`, format the report.

Formats: ``text`` (for people: one finding a paragraph, the command that fixes it under
it), ``--json``, ``markdown`` (a pull-request comment: a hidden ``<!-- knob-ledger-check
-->`` marker first, so a bot finds and edits its one comment; findings, what changed and
the entries by class with verdict and evidence headline), ``github`` (workflow commands:
``::error file=…,line=…,title=…::message`` annotations on the changed lines).
``--emit-matrix`` prints only the GitHub Actions matrix of the entries that still need
``ledger ab`` (``{"include": [{"entry": ID, …}]}``).

Exit status: 1 when a finding at error severity (with ``--fail-on warn``: any finding)
is left, 0 otherwise (``--fail-on never``: always 0, for a report-only step); ``error:``
and 1 when the range cannot be read at all; 2 for usage.
"""

from __future__ import annotations

import json
import re

import click

from ledger.cli.common import State
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import wants_json
from ledger.cli.output import safe

MARKER = "<!-- knob-ledger-check -->"

CHECK_HELP = """Refuse config changes between two commits that the ledger does not explain.

\b
  ledger check                          this branch against its upstream (pre-push)
  ledger check --base origin/main       a pull request's range (CI)
  ledger check --format markdown        a PR comment; --format github: annotations
  ledger check --emit-matrix            entries that still need `ledger ab`, as JSON

Every target file that changed is read at both commits with its format reader; each knob,
flag and engine release that differs must come with an entry recorded or changed in the
range.  Perf entries added or restored need evidence that is not a regression; entries
must match their files; entries.jsonl history is append-only.  Rules and severities:
`checks:` in ledger.yaml (error, warn, off).  Reads git objects only; writes nothing.
"""


@click.command("check", help=CHECK_HELP)
@click.option("--base", metavar="REF", help="The commit to compare with (default: the "
              "pre-push range's remote side, else the branch's upstream).")
@click.option("--head", metavar="REF", help="The commit checked (default HEAD).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "github"]),
              default="text", show_default=True, help="How to print the report.")
@click.option("--fail-on", type=click.Choice(["error", "warn", "never"]), default="error",
              show_default=True, help="Which findings make the exit status 1.")
@click.option("--emit-matrix", is_flag=True,
              help="Print the entries that still need `ledger ab` as a JSON matrix.")
@json_option
@click.pass_context
def check(ctx, base, head, fmt, fail_on, emit_matrix, json_out) -> None:
    from ledger.commands.check import run_check
    from ledger.core.findings import matrix
    from ledger.store.workspace import find_root

    root = find_root(explicit=ctx.find_object(State).workspace)
    report = run_check(root, base, head)
    if emit_matrix:
        click.echo(json.dumps(matrix(report.needs_ab), sort_keys=True))
        return
    if wants_json(ctx, json_out):
        emit_json(report.to_dict(fail_on))
    elif fmt == "markdown":
        click.echo(markdown(report, fail_on))
    elif fmt == "github":
        click.echo(github(report), nl=False)
    else:
        click.echo(text(report, fail_on))
    if report.failed(fail_on):
        ctx.exit(1)


def _verdict_line(report, fail_on: str) -> str:
    e, w = report.count("error"), report.count("warn")
    state = "failed" if report.failed(fail_on) else "passed"
    return (f"ledger check {state}: {e} error{'s' * (e != 1)}, {w} warning{'s' * (w != 1)} "
            f"({report.base[:12]}..{report.head[:12]}, {len(report.changes)} change"
            f"{'s' * (len(report.changes) != 1)}, {len(report.entries)} entr"
            f"{'ies' if len(report.entries) != 1 else 'y'} in the range)")


def text(report, fail_on: str) -> str:
    lines = []
    for f in report.findings:
        where = f"{safe(f.where)}: " if f.where else ""
        lines.append(f"{f.severity}: {where}{safe(f.message)} [{f.rule}]")
        if f.fix:
            lines.append(f"  fix: {safe(f.fix)}")
    for n in report.entries:
        ev = n.evidence
        lines.append(f"entry {n.entry.id} {n.what} ({n.entry.cls}): {safe(n.entry.title)} — "
                     f"{safe(ev.headline) if ev else 'no evidence'}")
    lines.append(_verdict_line(report, fail_on))
    return "\n".join(lines)


# -- markdown: every user value escaped, so a title cannot inject HTML or break a table ---

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md(value: object) -> str:
    s = safe("" if value is None else value)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s).replace("\n", " ")


def _code_block(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def markdown(report, fail_on: str) -> str:
    ok = not report.failed(fail_on)
    out = [MARKER, f"### knob ledger check: {'passed' if ok else 'failed'}", "",
           f"{report.count('error')} error(s), {report.count('warn')} warning(s) — "
           f"`{report.base[:12]}..{report.head[:12]}`", ""]
    if report.findings:
        out += ["#### Findings", "", "| | where | what | rule |", "|---|---|---|---|"]
        for f in report.findings:
            mark = "❌" if f.severity == "error" else "⚠️"
            out.append(f"| {mark} | {md(f.where) or '—'} | {md(f.message)} | {md(f.rule)} |")
        fixes = [f.fix for f in report.findings if f.fix]
        if fixes:
            out += ["", "To put them in the ledger:", "", _code_block("\n".join(
                safe(x) for x in fixes))]
        out.append("")
    if report.changes:
        out += ["#### Config changes", "", "| target | where | change | entries |",
                "|---|---|---|---|"]
        for c in report.changes:
            where = f"{c.path}:{c.line}" if c.line else c.path
            out.append(f"| {md(c.target)} | {md(where)} | {md(c.text)} | "
                       f"{md(', '.join(c.entries)) or '**none**'} |")
        out.append("")
    for cls in ("perf", "bugfix"):
        notes = [n for n in report.entries if n.entry.cls == cls]
        if not notes:
            continue
        out += [f"#### {cls} entries", "", "| entry | | title | verdict | evidence |",
                "|---|---|---|---|---|"]
        for n in notes:
            ev = n.evidence
            verdict = ev.verdict if ev and ev.verdict else "—"
            head = ev.headline if ev else "no evidence"
            if ev and ev.stale_why:
                head = f"[stale] {head}"
            out.append(f"| {md(n.entry.id)} | {md(n.what)} | {md(n.entry.title)} | "
                       f"{md(verdict)} | {md(head)} |")
        out.append("")
    if report.needs_ab:
        out.append("Still to measure: " + ", ".join(f"`ledger ab {md(e.id)}`"
                                                    for e in report.needs_ab))
    return "\n".join(out).rstrip() + "\n"


# -- GitHub workflow commands -----------------------------------------------------------

def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


def github(report) -> str:
    """One ``::error``/``::warning`` line per finding, on the file and line it names."""
    out = []
    for f in report.findings:
        level = "error" if f.severity == "error" else "warning"
        props = []
        if f.path:
            props.append(f"file={_gh_prop(f.path)}")
        if f.line:
            props.append(f"line={f.line}")
        props.append(f"title={_gh_prop('ledger check: ' + f.rule)}")
        body = f.message + (f"\nfix: {f.fix}" if f.fix else "")
        out.append(f"::{level} {','.join(props)}::{_gh_data(safe(body))}\n")
    return "".join(out)
