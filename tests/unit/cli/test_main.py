"""The command line, through `main()` and through `python -m mp_engine`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mp_engine.cli.main import main
from tests.conftest import REPO_ROOT, drop, read_state


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_init_then_idempotent(tmp_path, capsys):
    rc, out, _ = run_main(capsys, "init", str(tmp_path / "w"))
    assert rc == 0 and "created SESSION_STATE.json" in out
    rc, out, _ = run_main(capsys, "init", str(tmp_path / "w"))
    assert rc == 0 and "nothing changed" in out


def test_once_exit_codes(ws, capsys, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    assert run_main(capsys, "once", "--root", str(ws.root))[0] == 0  # nothing to do
    drop(ws, "# MP-1.0\n```bash\ntrue\n```\n")
    rc, out, _ = run_main(capsys, "once", "--root", str(ws.root))
    assert rc == 0 and "completed MP-1.0" in out
    drop(ws, "# MP-1.1\n```bash\nexit 9\n```\n")
    rc, out, _ = run_main(capsys, "once", "--root", str(ws.root))
    assert rc == 1 and "error MP-1.1" in out
    drop(ws, "# MP-1.2\n```bash\ntrue\n```\n")
    rc, out, _ = run_main(capsys, "once", "--root", str(ws.root))
    assert rc == 3 and "halted" in out


def test_once_waits_for_a_fresh_file_to_settle(ws, capsys):
    # FAST_ENV settles in 0.3 s; a file written just now is still taken by this one pass.
    drop(ws, "# MP-1.0\n```bash\ntrue\n```\n", how="write")
    rc, out, _ = run_main(capsys, "once", "--root", str(ws.root))
    assert rc == 0 and "completed MP-1.0" in out


def test_usage_and_config_errors_exit_2(ws, tmp_path, capsys):
    rc, _, err = run_main(capsys, "once", "--root", str(tmp_path / "nowhere"))
    assert rc == 2 and "mp-engine init" in err
    ws.config_file.write_text("[engine]\nbogus = 1\n")
    rc, _, err = run_main(capsys, "once", "--root", str(ws.root))
    assert rc == 2 and "engine.bogus: unknown key" in err
    assert run_main(capsys, "no-such-command")[0] == 2


def test_root_from_environment(ws, capsys, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ROOT", str(ws.root))
    rc, out, _ = run_main(capsys, "status", "--json")
    assert rc == 0 and json.loads(out)["root"] == str(ws.root)


def test_status_shows_halt_and_pending(ws, capsys, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    drop(ws, "# MP-2.0 Broken\n```bash\nexit 1\n```\n")
    run_main(capsys, "once", "--root", str(ws.root))
    drop(ws, "# MP-2.1 Next\n```bash\ntrue\n```\n")
    rc, out, _ = run_main(capsys, "status", "--root", str(ws.root), "--json")
    report = json.loads(out)
    assert report["state"]["status"] == "ERROR"
    assert report["halt"]["mp_id"] == "MP-2.0"
    assert report["pending"]["mp_id"] == "MP-2.1" and "held" in report["pending"]
    rc, out, _ = run_main(capsys, "status", "--root", str(ws.root))
    assert rc == 0 and "MP-2.0" in out and "Approves: MP-2.0" in out


def test_approve_lifts_the_halt(ws, capsys, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    drop(ws, "# MP-2.0\n```bash\nexit 1\n```\n")
    run_main(capsys, "once", "--root", str(ws.root))
    rc, out, _ = run_main(capsys, "approve", "--root", str(ws.root))
    assert rc == 0 and "MP-2.0" in out
    assert read_state(ws).get("halt") is None
    rc, out, _ = run_main(capsys, "approve", "--root", str(ws.root))
    assert rc == 0 and "nothing to approve" in out


def test_check_prints_structure_or_a_precise_error(tmp_path, capsys):
    good = REPO_ROOT / "examples" / "hello.md"
    rc, out, _ = run_main(capsys, "check", str(good))
    assert rc == 0 and "MP-0.1" in out and "step-001" in out and "check-001" in out
    rc, out, _ = run_main(capsys, "check", "--json", str(good))
    assert json.loads(out)["mp_id"] == "MP-0.1"
    bad = tmp_path / "bad.md"
    bad.write_text("# MP-1.0\nColour: red\n```bash\ntrue\n```\n")
    rc, _, err = run_main(capsys, "check", str(bad))
    assert rc == 1 and "unknown header key 'Colour'" in err and "(line 2)" in err and "fix:" in err


@pytest.mark.parametrize("example", ["hello.md", "failing.md", "approve.md"])
def test_examples_are_valid(example, capsys):
    assert run_main(capsys, "check", str(REPO_ROOT / "examples" / example))[0] == 0


def test_python_dash_m_is_the_same_cli(ws):
    proc = subprocess.run(
        [sys.executable, "-m", "mp_engine", "status", "--root", str(ws.root), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["state"]["status"] == "OFFLINE"
    version = subprocess.run([sys.executable, "-m", "mp_engine", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and "mp-engine" in version.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["init"],
        ["run"],
        ["once"],
        ["status"],
        ["history"],
        ["logs"],
        ["doctor"],
        ["service", "install"],
        ["check"],
        ["send"],
        ["approve"],
    ],
)
def test_every_command_has_an_example_in_its_help(command, capsys):
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Example" in out and "mp-engine " + command[0] in out.split("Example", 1)[1]


def test_version_names_the_package_version(capsys):
    from mp_engine import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"mp-engine, version {__version__}"
