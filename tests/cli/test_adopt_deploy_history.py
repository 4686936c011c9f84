"""Issue 51's Done-when: `ledger adopt --git` on a real-shaped deploy history (built with
real git in tests/cli/deploy_history.py: 16 commits, two renames, an ``if`` switch with an
args array, flags fed by shell variables, a ``docker run`` era with process substitution,
a commit retiring tuning knobs, a ``git revert``).  The whole plan is compared with a
hand-written truth; the plan is applied in one ``--apply`` after editing only the classes
it could not infer, every problem named in the first run; nothing written to the target."""

from __future__ import annotations

import os

from ruamel.yaml import YAML

from tests.cli.deploy_history import adopt_git
from tests.cli.deploy_history import make_deploy_repo
from tests.cli.after_the_incident import git

# Read off the commits by hand (cN: the Nth commit, oldest first).
TRUTH = """\
history: commit c5: renamed from launch_decode.sh to scripts/glm/serve_decode.sh (move launchers under scripts/)
history: commit c10: renamed from scripts/glm/serve_decode.sh to deploy/decode/serve.sh (move to deploy/decode)
1. 2026-10-03T10:00:00Z [perf] tune chunked prefill and mem fraction <- c2 (launch_decode.sh)
   --chunked-prefill-size: 8192 -> 16384  (history only)
   --mem-fraction-static: 0.85 -> 0.88
2. 2026-10-06T11:00:00Z [perf] PD queue 8, new-token ratio, gatherv <- c3 (launch_decode.sh)
   SGLANG_DISAGGREGATION_QUEUE_SIZE: 4 -> 8
   SGLANG_DP_USE_GATHERV: unset -> 1
   SGLANG_INIT_NEW_TOKEN_RATIO: unset -> 0.5
3. 2026-10-08T12:00:00Z [bugfix] fix: bootstrap timeout for slow prefill <- c4 (launch_decode.sh)
   SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT: unset -> 600
4. 2026-10-14T15:30:00Z [perf] DP attention switch <- c6 (scripts/glm/serve_decode.sh)
   --dp-size when DP_ATTENTION == true: unset -> 4
   --enable-dp-attention when DP_ATTENTION == true: unset -> true
   DP_ATTENTION: unset -> ${DP_ATTENTION:-false}  (history only)
   SGLANG_DP_USE_GATHERV: 1 -> unset  (revert_of?)
   SGLANG_DP_USE_GATHERV when DP_ATTENTION == true: unset -> 1  (history only)
5. 2026-10-20T10:00:00Z [perf] cuda graphs follow concurrency <- c7 (scripts/glm/serve_decode.sh)
   --cuda-graph-max-bs: unset -> ${CONC}  (history only)
   --max-running-requests: 256 -> ${CONC}  (history only)
   CONC: unset -> ${CONC:-64}  (history only)
6. 2026-10-22T10:00:00Z [perf] chunked prefill from the environment <- c8 (scripts/glm/serve_decode.sh)
   --chunked-prefill-size: 16384 -> $CHUNKED_PREFILL_SIZE  (history only)
   CHUNKED_PREFILL_SIZE: unset -> 16384
7. 2026-10-25T16:00:00Z [perf] DP: thread pool 8, dense tp 1 <- c9 (scripts/glm/serve_decode.sh)
   --moe-dense-tp-size when DP_ATTENTION == true: unset -> 1
   SGLANG_DISAGGREGATION_THREAD_POOL_SIZE when DP_ATTENTION == true: unset -> 8  (history only)
8. 2026-11-03T13:00:00Z [perf] run in docker, wait for the server <- c11 (deploy/decode/serve.sh)
   DP_ATTENTION: ${DP_ATTENTION:-false} -> unset  (revert_of?; history only)
   SGLANG_DISAGGREGATION_THREAD_POOL_SIZE when DP_ATTENTION == true: 8 -> unset  (revert_of?; history only)
   SGLANG_DP_USE_GATHERV when DP_ATTENTION == true: 1 -> unset  (revert_of?; history only)
9. 2026-11-10T09:00:00Z [perf] retire old tuning knobs <- c12 (deploy/decode/serve.sh)
   --mem-fraction-static: 0.88 -> unset
   SGLANG_INIT_NEW_TOKEN_RATIO: 0.5 -> unset  (revert_of?)
10. 2026-12-01T14:48:00Z [perf] perf: CTAS 512 (+12.8% @c64) <- c13 (deploy/decode/serve.sh)
   SGLANG_SM120_MMA_TARGET_CTAS: unset -> 512  (reverted 2026-12-02T14:14:00Z by c14 (deploy/decode/serve.sh))
11. 2026-12-02T15:05:00Z [bugfix] concurrency 128, watchdog <- c15 (deploy/decode/serve.sh)
   --watchdog-timeout: unset -> 600
   CONC: ${CONC:-64} -> ${CONC:-128}  (history only)
12. 2026-12-03T10:00:00Z [?] decode on tp 8 <- c16 (deploy/decode/serve.sh)
   TP: 4 -> 8
"""


def render(plan: dict, shas: list[str]) -> str:
    """The readable part of a plan, one line per proposal and per change."""
    short = {s[:12]: f"c{i + 1}" for i, s in enumerate(shas)}

    def sub(text: str) -> str:
        for k, v in short.items():  # an origin "commit SHA (path) by ...": "cN (path)"
            text = text.replace(f"commit {k} (", f"{v} (").replace(k, v)
        return text.split(" by op <")[0]

    def value(x) -> str:
        return "unset" if x is None else str(x)

    out = [f"history: {sub(h)}" for h in plan["history"]]
    out += [f"skipped: {h}" for h in plan["skipped"]] + [f"unclear: {h}" for h in plan["unclear"]]
    for g in plan["proposals"]:
        out.append(f"{g['n']}. {g['when']} [{g['class'] or '?'}] {g['title']} <- "
                   f"{sub(g['origin'])}")
        for c in g["changes"]:
            tail = []
            if c.get("reverted"):
                tail.append(f"reverted {c['reverted']['when']} by {sub(c['reverted']['origin'])}")
            if "revert_of" in c:
                tail.append("revert_of?")
            if c.get("record") is False:
                tail.append("history only")
            where = f" {c['where']}" if c.get("where") else ""
            out.append(f"   {c['knob']}{where}: {value(c['before'])} -> {value(c['after'])}"
                       + (f"  ({'; '.join(tail)})" if tail else ""))
    return "\n".join(out) + "\n"


def test_a_real_shaped_deploy_history_is_proposed_whole_and_applied_in_one_run(tmp_path, ledger):
    repo, shas = make_deploy_repo(tmp_path)
    assert len(shas) >= 17  # 16 of the script (two renames, a git revert) and a readme
    script = repo / "deploy/decode/serve.sh"
    before = (script.read_bytes(), os.stat(script).st_mtime_ns)
    ws = tmp_path / "ws"
    assert ledger("init", ws, "--root", f"ops={tmp_path}").exit_code == 0
    r = ledger("-C", ws, "target", "add", "decode", script, "--format", "bash")
    assert r.exit_code == 0, r.stderr  # process substitution and all
    plan_path = tmp_path / "adopt-decode.yaml"
    r = ledger("-C", ws, "adopt", "decode", "--git", repo, "--path", "deploy/decode/serve.sh",
               "--dry-run")
    assert r.exit_code == 0 and not plan_path.exists()
    r = ledger("-C", ws, "adopt", "decode", "--git", repo, "--path", "deploy/decode/serve.sh",
               "--out", plan_path)
    assert r.exit_code == 0, r.stderr
    text = plan_path.read_text()
    plan = YAML(typ="safe").load(text)
    assert render(plan, shas) == TRUTH
    # a change is a line; the readable part first, the machine data after it
    assert "  - {knob: TP, before: '4', after: '8'}\n" in text
    assert len(text[:text.index("\ndata:")].splitlines()) < 200
    assert text.index("proposals:") < text.index("\ndata:") and "lines_sha256" not in \
        text[:text.index("\ndata:")]
    # every problem in one run: the class nothing said (the docker move's class is the
    # catalog's: the SGLang knobs it stopped passing to the container)
    r = ledger("-C", ws, "adopt", "--apply", plan_path)
    assert r.exit_code == 1 and "1 problem; nothing recorded" in r.stderr, r.stderr
    assert "proposal 12 (TP): class must be perf or bugfix" in r.stderr
    edit = YAML()
    plan = edit.load(text)
    plan["proposals"][7]["class"] = "bugfix"  # the docker move: how it runs
    plan["proposals"][11]["class"] = "perf"
    edit.dump(plan, plan_path)
    commits = int(git(ws, "rev-list", "--count", "HEAD"))
    r = ledger("-C", ws, "adopt", "--apply", plan_path, "--dry-run")
    assert r.exit_code == 0 and int(git(ws, "rev-list", "--count", "HEAD")) == commits
    r = ledger("-C", ws, "adopt", "--apply", plan_path)
    assert r.exit_code == 0, r.stderr
    assert int(git(ws, "rev-list", "--count", "HEAD")) == commits + 1  # one commit
    assert "history only (in the commit message, no entry): CONC: ${CONC:-64} -> " \
        "${CONC:-128}" in r.stdout
    rows = ledger("-C", ws, "list", "--json").json()
    assert len(rows) == 15
    assert [(e["knob"], e["state"]) for e in rows if e["state"] != "applied"] == [
        ("SGLANG_SM120_MMA_TARGET_CTAS", "reverted")]
    # the docker run of c11 passes no -e SGLANG_DP_USE_GATHERV: the server has not seen the
    # DP branch's export since, so its history ends with c6 taking the top-level one out
    gatherv = [(e["title"], e["after"]) for e in rows if e["knob"] == "SGLANG_DP_USE_GATHERV"]
    assert gatherv == [("PD queue 8, new-token ratio, gatherv", "1"), ("DP attention switch", None)]
    dp_size = [e for e in rows if e["knob"] == "--dp-size"]
    assert [e["title"] for e in dp_size] == ["DP attention switch"] and dp_size[0]["places"]
    assert ledger("-C", ws, "status", "--exit-code").exit_code == 0  # the file agrees
    # adopted again: every change the ledger now holds starts kept out, places included
    r = ledger("-C", ws, "adopt", "decode", "--git", repo, "--path", "deploy/decode/serve.sh",
               "--out", tmp_path / "again.yaml")
    assert r.exit_code == 0, r.stderr
    again = [c for g in YAML(typ="safe").load((tmp_path / "again.yaml").read_text())["proposals"]
             for c in g["changes"]]
    assert len(again) == 27 and all(c.get("keep") is False or c.get("record") is False
                                    for c in again)
    diff = ledger("-C", ws, "diff").stdout
    assert "off the table: 1 reverted entry" in diff and "SGLANG_INIT_NEW_TOKEN_RATIO" not in diff
    assert (script.read_bytes(), os.stat(script).st_mtime_ns) == before  # nothing written
    message = git(ws, "log", "-1", "--format=%B")
    assert "- history only: --max-running-requests: 256 -> ${CONC}" in message


def test_per_knob_splits_each_commit_and_a_revert_of_is_honoured(tmp_path, ledger):
    """``--per-knob``: one proposal per change; ``revert_of: N`` written by the operator
    turns a retiring change into the revert of proposal N's change."""
    repo, shas = make_deploy_repo(tmp_path)
    ws, plan_path, r = adopt_git(ledger, tmp_path, repo, "deploy/decode/serve.sh", "--per-knob")
    assert r.exit_code == 0, r.stderr
    edit = YAML()
    plan = edit.load(plan_path.read_text())
    assert all(len(g["changes"]) == 1 for g in plan["proposals"])
    assert len(plan["proposals"]) == 27  # the 27 changes of the truth above
    ratio = [g for g in plan["proposals"] if g["changes"][0]["knob"] == "SGLANG_INIT_NEW_TOKEN_RATIO"]
    assert [g["changes"][0]["after"] for g in ratio] == ["0.5", None]
    ratio[1]["changes"][0]["revert_of"] = ratio[0]["n"]
    for g in plan["proposals"]:
        g["class"] = g["class"] or "perf"
    edit.dump(plan, plan_path)
    r = ledger("-C", ws, "adopt", "--apply", plan_path)
    assert r.exit_code == 0, r.stderr
    rows = ledger("-C", ws, "list", "--json").json()
    ratios = [e for e in rows if e["knob"] == "SGLANG_INIT_NEW_TOKEN_RATIO"]
    assert [(e["after"], e["state"]) for e in ratios] == [("0.5", "reverted")]
    assert ledger("-C", ws, "status", "--exit-code").exit_code == 0
