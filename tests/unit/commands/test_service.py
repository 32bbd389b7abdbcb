"""`mp-engine service install`: the systemd units and the launchd plist, rendered with real
paths, checked by `systemd-analyze verify` and `plistlib`."""

from __future__ import annotations

import os
import plistlib
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mp_engine.cli.main import main
from tests.conftest import REPO_ROOT


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def rendered_file(out: str) -> str:
    """The file part of a --dry-run output: after the `# PATH` line, before the commands."""
    lines = out.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("# to enable it"))
    return "\n".join(lines[1:end]) + "\n"


def settings(unit: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in unit.splitlines():
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def test_system_unit_has_real_paths_and_timeouts_from_the_config(ws, capsys, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_EXECUTION__MP_TIMEOUT", "7200")
    target = Path("/etc/systemd/system/mp-engine.service")
    existed = target.exists()
    rc, out, _ = run_main(capsys, "service", "install", "--systemd", "--root", str(ws.root), "--dry-run")
    assert rc == 0
    assert out.startswith(f"# {target} (systemd system service; --dry-run: not written)")
    assert target.exists() == existed  # --dry-run writes nothing
    unit = settings(rendered_file(out))
    assert unit["Type"] == ["notify"] and unit["NotifyAccess"] == ["main"]
    assert unit["ExecStart"] == [f"{os.path.abspath(sys.executable)} -m mp_engine run --root {ws.root}"]
    assert unit["WorkingDirectory"] == [str(ws.root)] and unit["ReadWritePaths"] == [str(ws.root)]
    owner = pwd.getpwuid(os.stat(ws.root).st_uid)
    assert unit["User"] == [owner.pw_name] and unit["Environment"][0] == f"HOME={owner.pw_dir}"
    assert int(unit["TimeoutStopSec"][0]) > 7200  # longer than the MP timeout: the step may finish
    assert int(unit["WatchdogSec"][0]) >= 60
    assert unit["Restart"] == ["on-failure"] and unit["KillMode"] == ["mixed"]
    assert unit["RestartPreventExitStatus"] == ["2"]  # a config or usage error is not retried forever
    assert unit["ProtectSystem"] == ["strict"] and unit["ProtectHome"] == ["read-only"]
    assert unit["NoNewPrivileges"] == ["yes"] and unit["PrivateTmp"] == ["yes"]
    assert "systemctl enable --now mp-engine" in out and "journalctl -u mp-engine -f" in out


def test_watchdog_outlasts_git_retries_when_git_is_on(ws, capsys, monkeypatch):
    from mp_engine.commands.service import liveness_bound
    from mp_engine.config.load import load_config

    off = liveness_bound(load_config(ws.root))
    monkeypatch.setenv("MP_ENGINE_GIT__ENABLED", "true")
    on = liveness_bound(load_config(ws.root))
    assert on > 60 * 5 > off  # five push attempts of up to [git] timeout each fit in the watchdog


@pytest.mark.parametrize("user_scope", [False, True], ids=["system", "user"])
def test_systemd_analyze_verify_accepts_the_rendered_unit(ws, capsys, tmp_path, user_scope):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (.ci/run installs the systemd package when apt is available)")
    rc, out, _ = run_main(
        capsys,
        "service",
        "install",
        "--systemd",
        "--root",
        str(ws.root),
        "--dry-run",
        *(["--user"] if user_scope else []),
    )
    assert rc == 0
    unit = tmp_path / "units" / "mp-engine.service"
    unit.parent.mkdir()
    unit.write_text(rendered_file(out))
    proc = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=120)
    # verify exits 0 even for an unknown key; it only warns. Both must be clean.
    problems = [line for line in proc.stderr.splitlines() if "mp-engine.service" in line]
    assert proc.returncode == 0 and not problems, proc.stderr


def test_user_unit_is_written_under_home_and_a_reinstall_is_unchanged(ws, capsys, hermetic_env, monkeypatch):
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    rc, out, _ = run_main(capsys, "service", "install", "--systemd", "--user", "--root", str(ws.root))
    path = hermetic_env / ".config" / "systemd" / "user" / "mp-engine.service"
    assert rc == 0 and out.splitlines()[0] == f"created {path}"
    unit = settings(path.read_text())
    assert "User" not in unit and unit["PrivateUsers"] == ["yes"]  # a user manager needs it for the sandbox
    assert "systemctl --user enable --now mp-engine" in out and "loginctl enable-linger" in out
    rc, out, _ = run_main(capsys, "service", "install", "--systemd", "--user", "--root", str(ws.root))
    assert out.splitlines()[0] == f"unchanged {path}"


def test_launchd_plist_is_valid_and_keeps_the_engine_alive_only_after_failures(ws, capsys, hermetic_env):
    rc, out, _ = run_main(capsys, "service", "install", "--launchd", "--root", str(ws.root))
    path = hermetic_env / "Library" / "LaunchAgents" / "com.mp-engine.agent.plist"
    assert rc == 0 and f"created {path}" in out
    plist = plistlib.loads(path.read_bytes())
    assert plist["Label"] == "com.mp-engine.agent"
    assert plist["ProgramArguments"] == [
        os.path.abspath(sys.executable),
        "-m",
        "mp_engine",
        "run",
        "--root",
        str(ws.root),
    ]
    assert plist["WorkingDirectory"] == str(ws.root)
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert isinstance(plist["ThrottleInterval"], int) and plist["ThrottleInterval"] > 0
    logs = hermetic_env / "Library" / "Logs" / "mp-engine.log"
    assert plist["StandardOutPath"] == plist["StandardErrorPath"] == str(logs) and logs.parent.is_dir()
    # launchd has no watchdog: the engine's own stall limit is switched on, above the idle wait.
    assert int(plist["EnvironmentVariables"]["MP_ENGINE_WATCH__STALL_LIMIT"]) >= 60
    assert plist["ExitTimeOut"] > 3600  # the default mp_timeout
    assert "launchctl bootstrap gui/" in out


def test_the_packaged_templates_are_the_shipped_files():
    from mp_engine.commands.service import template

    assert template("mp-engine.service") == (REPO_ROOT / "systemd" / "mp-engine.service").read_text()
    assert template("mp-engine-user.service") == (REPO_ROOT / "systemd" / "mp-engine-user.service").read_text()
    assert template("com.mp-engine.agent.plist") == (REPO_ROOT / "launchd" / "com.mp-engine.agent.plist").read_text()


def test_a_path_a_unit_cannot_carry_is_refused(tmp_path, capsys):
    rc, _, _ = run_main(capsys, "init", str(tmp_path / "50%off"))
    assert rc == 0
    rc, _, err = run_main(capsys, "service", "install", "--root", str(tmp_path / "50%off"), "--dry-run")
    assert rc == 2 and "cannot carry plainly" in err


def worker_dir(tmp_path: Path) -> Path:
    root = tmp_path / "mp-worker"
    root.mkdir()
    (root / "mp-engine.toml").write_text('[fleet]\ntemporal = "10.0.0.5:7233"\nwork_remote = "git@h:w.git"\n')
    return root


@pytest.mark.parametrize("user_scope", [False, True], ids=["system", "user"])
def test_a_workers_unit_runs_mp_engine_worker_on_its_directory(tmp_path, capsys, user_scope):
    root = worker_dir(tmp_path)
    scope = ["--user"] if user_scope else []
    rc, out, _ = run_main(
        capsys, "service", "install", "--worker", "--systemd", *scope, "--root", str(root), "--dry-run"
    )
    assert rc == 0, out
    text = rendered_file(out)
    unit = settings(text)
    assert unit["ExecStart"] == [f"{os.path.abspath(sys.executable)} -m mp_engine worker --root {root}"]
    assert unit["Type"] == ["simple"] and unit["RestartPreventExitStatus"] == ["2"] and unit["KillMode"] == ["mixed"]
    assert unit["ReadWritePaths"] == [str(root)] and unit["ProtectSystem"] == ["strict"]
    assert "mp-engine-worker.service" in out.splitlines()[0]
    assert "enable --now mp-engine-worker" in out
    analyze = shutil.which("systemd-analyze")
    if analyze is not None:  # .ci/run installs it when apt can
        path = tmp_path / "units" / "mp-engine-worker.service"
        path.parent.mkdir()
        path.write_text(text)
        proc = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True, timeout=120)
        problems = [line for line in proc.stderr.splitlines() if "mp-engine-worker.service" in line]
        assert proc.returncode == 0 and not problems, proc.stderr


def test_a_workers_plist_and_a_worker_directory_without_temporal(tmp_path, capsys, hermetic_env):
    root = worker_dir(tmp_path)
    rc, out, _ = run_main(capsys, "service", "install", "--worker", "--launchd", "--root", str(root))
    path = hermetic_env / "Library" / "LaunchAgents" / "com.mp-engine.worker.plist"
    assert rc == 0 and f"created {path}" in out
    plist = plistlib.loads(path.read_bytes())
    assert plist["Label"] == "com.mp-engine.worker" and plist["ProgramArguments"][3:] == ["worker", "--root", str(root)]
    (root / "mp-engine.toml").write_text("")
    rc, _, err = run_main(capsys, "service", "install", "--worker", "--launchd", "--root", str(root), "--dry-run")
    assert rc == 2 and "has no [fleet] temporal" in err


def test_the_packaged_worker_templates_are_the_shipped_files():
    from mp_engine.commands.service import template

    for name in ("mp-engine-worker.service", "mp-engine-worker-user.service"):
        assert template(name) == (REPO_ROOT / "systemd" / name).read_text()
    assert template("com.mp-engine.worker.plist") == (REPO_ROOT / "launchd" / "com.mp-engine.worker.plist").read_text()
