"""Issue 25 item 3: systemd service units as a format (``--format systemd``).

Every shape in :mod:`tests.envknobs.systemd_shapes` is read as systemd reads it
(``systemd-analyze verify`` is the oracle), each edit changes what systemd reads and
nothing else, and every edit that would take no effect is refused naming its line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envknobs.formats import get_format
from envknobs.formats.common import FormatError
from envknobs.formats.common.places import PlaceEdit
from envknobs.formats.systemd import SystemdFormat
from envknobs.formats.systemd.container import env_knobs
from envknobs.formats.systemd.execstart import launch_of
from envknobs.formats.systemd.service import read_service
from tests.envknobs.systemd_oracle import needs_systemd
from tests.envknobs.systemd_oracle import systemd_reads
from tests.envknobs.systemd_shapes import DOCKER_UNIT
from tests.envknobs.systemd_shapes import DYNAMO_UNIT
from tests.envknobs.systemd_shapes import APPTAINER_UNIT
from tests.envknobs.systemd_shapes import ONESHOT_UNIT
from tests.envknobs.systemd_shapes import SCRIPT_UNIT
from tests.envknobs.systemd_shapes import SGLANG_UNIT
from tests.envknobs.systemd_shapes import UNITS
from tests.envknobs.systemd_shapes import VLLM_UNIT

FMT = get_format("systemd")


def _env_of(text: str) -> dict[str, str]:
    return {k: v for k, v in FMT.parse(text).items() if not k.startswith("--")}


def _argv(text: str, tmp: Path) -> list[str]:
    (cmd,) = systemd_reads(text, tmp).commands
    return cmd


@needs_systemd
@pytest.mark.parametrize("shape", sorted(UNITS))
def test_env_is_what_systemd_reads(tmp_path, shape):
    text = UNITS[shape]
    parsed = systemd_reads(text, tmp_path)
    assert parsed.warnings == []
    computed = {k for k, s in ((k, FMT.knob(text, k)) for k in parsed.env)
                if s is not None and s.places[0].computed}
    read = {k: v for k, v in parsed.env.items() if k not in computed}
    # what systemd hands the command, as far as the server gets it: a container launch
    # (docker run) passes none of it but its own -e options (issue 50)
    svc = read_service(text)
    assert _env_of(text) == env_knobs(svc, launch_of(svc), read)


def test_flags_are_read_from_execstart():
    got = FMT.parse(SGLANG_UNIT)
    assert got["--tp-size"] == "2" and got["--port"] == "8001"
    assert "--enable-torch-compile" not in got  # a comment line inside the continuation
    assert FMT.parse(DYNAMO_UNIT)["--gpu-memory-utilization"] == "0.8"
    assert FMT.parse(DYNAMO_UNIT)["--enforce-eager"] == "true"


@needs_systemd
@pytest.mark.parametrize("shape, flag", [("vllm venv", "--port"), ("sglang", "--port"),
                                         ("env vllm", "--port"), ("dynamo", "--max-model-len")])
def test_a_flag_set_added_and_unset_changes_the_argv_systemd_passes(tmp_path, shape, flag):
    text = UNITS[shape]
    argv = _argv(text, tmp_path)
    port = FMT.parse(text)[flag]
    out = FMT.set(text, flag, "9000")
    assert _argv(out, tmp_path) == [a.replace(port, "9000") if a.endswith(port) and
                                    (a == port or a.startswith(flag)) else a for a in argv]
    new = "--max-running-requests" if shape == "sglang" else "--max-num-batched-tokens"
    added = FMT.set(out, new, "4096")
    tail = _argv(added, tmp_path)[-2:]  # in the style the unit's flags use
    assert tail == [new, "4096"] or tail[-1] == f"{new}=4096"
    assert FMT.parse(added)[new] == "4096"
    assert FMT.set(FMT.unset(added, new), flag, port) == text
    gone = _argv(FMT.unset(text, flag), tmp_path)
    assert not any(a == flag or a.startswith(flag + "=") for a in gone)
    assert port not in gone


@needs_systemd
def test_env_edits_in_each_quoting_style_read_back_in_systemd(tmp_path):
    text = SGLANG_UNIT
    out = FMT.set(text, "NCCL_DEBUG", "INFO two")  # inside a "K=V" word among others
    out = FMT.set(out, "PYTHONPATH", "/a b/$x%y")  # a 'K=V' word
    out = FMT.set(out, "CUDA_VISIBLE_DEVICES", "2,3")  # a bare word
    out = FMT.set(out, "NEW_KNOB", 'q"uote\\d')  # a new line
    env = systemd_reads(out, tmp_path).env
    assert env["NCCL_DEBUG"] == "INFO two" and env["PYTHONPATH"] == "/a b/$x%y"
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env["NEW_KNOB"] == 'q"uote\\d'
    assert env["LOG_FMT"] == "%Y-%m"
    assert _argv(out, tmp_path) == _argv(text, tmp_path)
    for k in ("NEW_KNOB",):
        out = FMT.unset(out, k)
    out = FMT.set(FMT.set(FMT.set(out, "NCCL_DEBUG", "WARN"), "PYTHONPATH",
                          "/home/ivan/sglang/python"), "CUDA_VISIBLE_DEVICES", "0,1")
    assert out == text


def test_a_new_knob_lands_after_the_last_environment_line():
    out = FMT.set(VLLM_UNIT, "VLLM_USE_V1", "1")
    lines = out.splitlines()
    assert lines[lines.index("Environment=HF_HOME=/opt/vllm/.cache/huggingface") + 1] == \
        '"VLLM_USE_V1=1"'.join(["Environment=", ""])
    out = FMT.set(SCRIPT_UNIT.replace("Environment=VLLM_WORKER_MULTIPROC_METHOD=spawn\n", ""),
                  "A", "1")
    assert "Environment=A=1\nExecStart=" in out


def test_unset_of_a_word_among_others_is_put_back_byte_exactly():
    text = DYNAMO_UNIT
    place = FMT.knob(text, "DYN_LOG").places[0]
    assert place.kind == "env-word" and place.anchor is not None
    out = FMT.unset(text, "DYN_LOG")
    assert out.splitlines()[5] == 'Environment="VLLM_NIXL_SIDE_CHANNEL_PORT=20097"'
    back = FMT.edit_places(out, "DYN_LOG", [PlaceEdit(place.key, "info", place.raw, place.anchor)])
    assert back == text
    flag = FMT.knob(text, "--enforce-eager").places[0]
    out = FMT.unset(text, "--enforce-eager")
    assert "--enforce-eager" not in out
    back = FMT.edit_places(out, "--enforce-eager",
                           [PlaceEdit(flag.key, "true", flag.raw, flag.anchor)])
    assert back == text


def test_a_whole_line_assignment_goes_with_its_line():
    out = FMT.unset(VLLM_UNIT, "HF_HOME")
    assert "HF_HOME" not in out and "Environment=\n" not in out
    assert len(out.splitlines()) == len(VLLM_UNIT.splitlines()) - 1


@pytest.mark.parametrize("text, knob, value, says", [
    (DOCKER_UNIT, "HF_HOME", "/x", "line 9: ExecStart= runs docker/podman"),
    (ONESHOT_UNIT, "--port", "1", "2 ExecStart= commands (line 6, line 7)"),
    (SCRIPT_UNIT, "--port", "1", "line 7: ExecStart= runs '/mnt/data/Lex/scripts/run_vllm"),
    (SGLANG_UNIT, "HF_HOME", "/x", "line 12: HF_HOME holds a specifier"),
    ("[Service]\nEnvironment=A=1\nUnsetEnvironment=A\nExecStart=/usr/bin/vllm serve m\n",
     "A", "2", "line 3: UnsetEnvironment= removes A"),
    ("[Service]\nEnvironment=VLLM_X=2\nExecStart=/usr/bin/env VLLM_X=1 vllm serve m\n",
     "VLLM_X", "3", "line 3: ExecStart= sets VLLM_X=1 on its command"),
    ("[Service]\nEnvironmentFile=/etc/v.env\nExecStart=/usr/bin/vllm serve m --port 1 $OPTS\n",
     "--port", "2", "line 3: ExecStart= passes $OPTS after --port"),
    ("[Service]\nExecStart=/usr/bin/vllm serve m --port 1 ${OPTS}\n",
     "--port", None, "line 2: ExecStart= passes ${OPTS} after --port"),
])
def test_edits_that_would_take_no_effect_are_refused_naming_the_line(text, knob, value, says):
    with pytest.raises(FormatError) as e:
        FMT.set(text, knob, value) if value is not None else FMT.unset(text, knob)
    assert says in str(e.value)


def test_a_knob_an_environment_file_sets_is_refused_naming_file_and_line(tmp_path):
    env = tmp_path / "vllm.env"
    env.write_text("# tuned\nVLLM_LOGGING_LEVEL=DEBUG\n")
    text = VLLM_UNIT.replace("/etc/vllm/vllm.env", str(env))
    with pytest.raises(FormatError) as e:
        FMT.set(text, "VLLM_LOGGING_LEVEL", "WARNING")
    assert f"{env}:2 (EnvironmentFile= at line 13)" in str(e.value)
    assert "--format dotenv" in str(e.value)
    notes = FMT.outside_notes(text)
    assert any("VLLM_LOGGING_LEVEL (line 2)" in n for n in notes)
    assert FMT.parse(FMT.set(text, "HF_HOME", "/y"))["HF_HOME"] == "/y"  # not in the file


def test_a_required_environment_file_that_is_missing_is_refused(tmp_path):
    text = VLLM_UNIT.replace("-/etc/vllm/vllm.env", str(tmp_path / "absent.env"))
    with pytest.raises(FormatError, match="line 13: .*required but not on this machine"):
        FMT.set(text, "HF_HOME", "/y")


def test_optional_missing_environment_file_is_skipped_as_systemd_skips_it():
    fmt = SystemdFormat(read=lambda p: None)
    assert fmt.parse(fmt.set(VLLM_UNIT, "HF_HOME", "/y"))["HF_HOME"] == "/y"


def test_a_file_without_a_service_section_is_refused():
    with pytest.raises(FormatError, match="no \\[Service\\] section"):
        FMT.parse("A=1\n")


def test_the_script_unit_names_its_unrecognised_launch():
    notes = FMT.summary(SCRIPT_UNIT).notes
    assert any("line 7" in n and "does not recognise" in n for n in notes)


@needs_systemd
def test_a_flag_added_after_a_computed_word_goes_last_and_wins(tmp_path):
    # $OPTS comes from outside the unit (the manager's environment): the ledger cannot
    # see into it (a literal Environment=OPTS= is a string of flags: test_arg_strings)
    text = "[Service]\nEnvironment=HF_HOME=/hf\nExecStart=/usr/bin/vllm serve m $OPTS\n"
    out = FMT.set(text, "--port", "2")
    assert out == text.replace("$OPTS\n", "$OPTS --port 2\n")
    # systemd-analyze shows the unexpanded $OPTS (expanded at start): --port 2 is last
    assert systemd_reads(out, tmp_path).commands[0][-3:] == ["$OPTS", "--port", "2"]


def test_a_cleanenv_apptainer_unit_takes_only_what_apptainer_passes_in():
    """Issue 50: Environment= reaches `apptainer exec --cleanenv`, not the server, except
    APPTAINERENV_K (the server's K); --env options are named in a note."""
    assert _env_of(APPTAINER_UNIT) == {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}
    summary = FMT.summary(APPTAINER_UNIT)
    place = summary.get("VLLM_ATTENTION_BACKEND").places[0]
    assert place.line == 8 and place.raw == "APPTAINERENV_VLLM_ATTENTION_BACKEND=FLASHINFER"
    assert any("Environment= VLLM_USE_V1 (line 7) reaches that wrapper, not the server" in n
               for n in summary.notes)
    assert any("--env options on that line: HF_HUB_OFFLINE=1" in n for n in summary.notes)
    out = FMT.set(APPTAINER_UNIT, "VLLM_ATTENTION_BACKEND", "FLASH_ATTN")
    assert out == APPTAINER_UNIT.replace("=FLASHINFER", "=FLASH_ATTN")
    out = FMT.set(APPTAINER_UNIT, "VLLM_USE_V1", "0")  # a line that reaches the server
    assert "Environment=APPTAINERENV_VLLM_USE_V1=0\n" in out
    assert "Environment=VLLM_USE_V1=1\n" in out
    assert FMT.unset(out, "VLLM_USE_V1") == APPTAINER_UNIT
    with pytest.raises(FormatError, match=r"line 9: ExecStart= runs /usr/bin/apptainer exec "
                                          r"--cleanenv: .*edit its --env HF_HUB_OFFLINE=VALUE "
                                          r"on that line by hand"):
        FMT.set(APPTAINER_UNIT, "HF_HUB_OFFLINE", "0")
    with pytest.raises(FormatError, match=r"line 9: ExecStart= runs docker/podman run: .*"
                                          r"write -e VLLM_USE_V1=VALUE on that line by hand"):
        FMT.set(DOCKER_UNIT, "VLLM_USE_V1", "1")
