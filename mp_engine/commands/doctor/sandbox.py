"""The agent sandbox (`[agent] sandbox`, docs/AGENT.md), tested for real: a probe inside it
must fail to read a hidden file and must write its worktree; the endpoint each sandboxed
level is configured to use, which the sandbox allows, must answer (issue #44); and codex's
own sandbox, which fails every command on a host with a system bwrap when `CODEX_HOME` is
under /tmp."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from mp_engine.agent.api import cli_of, codex_temp, reach
from mp_engine.commands.doctor.check import FAIL, OK, WARN, Check
from mp_engine.config.load import Config
from mp_engine.core.workspace import Workspace
from mp_engine.execute.process import scrub_env
from mp_engine.execute.sandbox import Sandbox, confined, problem

CONNECT_TIMEOUT = 5.0


def sandbox(ws: Workspace, config: Config) -> Check:
    cfg = config.agent
    levels = [lv for lv in cfg.all_levels() if not lv.hard_gate]
    why = problem()
    if not cfg.wants_sandbox():
        if levels and why is None and not config.fleet.enabled:
            return Check(
                "sandbox",
                WARN,
                "off: agents run with the daemon user's full rights (its ssh keys, this workspace's secrets, any host)",
                'set [agent] sandbox = "os": bubblewrap works on this host (docs/AGENT.md, "The sandbox")',
            )
        return Check("sandbox", OK, "off" + (f" (and it could not run here: {why})" if why else ""))
    if why is not None:
        return Check("sandbox", FAIL, f'[agent] sandbox = "os" cannot work: {why}', "see the message")
    found = probe()
    if found:
        return Check(
            "sandbox", FAIL, f"the probe escaped the sandbox: {found}", 'report it; set sandbox = "none" meanwhile'
        )
    boxed = [lv.name for lv in levels if cfg.sandboxed(lv)]
    hosts = sorted(
        {h for lv in levels if cfg.sandboxed(lv) for h in (*cfg.sandbox_allow_hosts, *lv.sandbox_allow_hosts)}
    )
    return Check(
        "sandbox",
        OK,
        f"bubblewrap works: a probe could not read a hidden file and could write its worktree; sandboxed: "
        f"{', '.join(boxed) or 'no level'}{' and the checks' if cfg.sandboxed() else ''}; network only to "
        f"{', '.join(hosts) or 'nowhere'} and the endpoint each level is configured to use (every other host "
        "and port unreachable)",
    )


def probe() -> str | None:
    """Run a probe in a sandbox over a throwaway workspace; what it could do that it must
    not, or could not do that it must (None: it behaved)."""
    with tempfile.TemporaryDirectory(prefix="mp-engine-doctor-") as tmp:
        root = Path(tmp) / "ws"
        work = root / "work"
        work.mkdir(parents=True)
        (root / "mp-engine.toml").write_text("secret = 'doctor-probe'\n")
        box = Sandbox.of(work, engine_root=root)
        script = f"cat {root}/mp-engine.toml; echo done > {work}/probe.txt"
        with confined(box, ["sh", "-c", script]) as argv:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=work)
        if "doctor-probe" in r.stdout:
            return "it read a file the sandbox hides"
        if not (work / "probe.txt").exists():
            return f"it could not write its worktree ({r.stderr.strip()[:200]})"
    return None


def endpoints(ws: Workspace, config: Config) -> Check:
    """Where each sandboxed level is configured to connect (agent/call/endpoints.py): what the
    sandbox allows for it must answer from this host, and what only the workspace names is
    never allowed (its calls would end `agent_unreachable`)."""
    cfg = config.agent
    levels = [lv for lv in cfg.all_levels() if not lv.hard_gate and cfg.sandboxed(lv)]
    if not levels:
        return Check("sandbox network", OK, "no level runs in the sandbox")
    said, down, named = [], [], []
    for lv in levels:
        found = reach(lv, scrub_env(lv.env_allow), ws.root)
        hosts = [*cfg.sandbox_allow_hosts, *lv.sandbox_allow_hosts]
        for e in found.endpoints:
            if not e.trusted and e.host not in hosts:
                named.append(f"{lv.name}: {e.source} points it at {e.host}, which the sandbox does not open")
            elif e.trusted and (why := _unanswered(e.host)) is not None:
                down.append(f"{lv.name}: {e.host} ({e.source}) {why}")
            elif e.trusted:
                said.append(f"{lv.name} to {e.host} ({e.source.split(' (')[0]})")
        if not found.allowed():
            said.append(f"{lv.name} to its default API ({', '.join(hosts) or 'no host'})")
    if down:
        return Check(
            "sandbox network",
            FAIL,
            "; ".join(down),
            "start the endpoint, or correct the URL where it is set (a call to it would fail the same outside the sandbox)",
        )
    if named:
        return Check(
            "sandbox network",
            WARN,
            "; ".join(named) + " (such a call ends BLOCKED agent_unreachable)",
            "remove it from the workspace, or add the host to the level's sandbox_allow_hosts if it is yours",
        )
    return Check("sandbox network", OK, "the sandbox lets " + "; ".join(said) + " through" if said else "nothing")


def _unanswered(host_port: str) -> str | None:
    """Why `host:port` does not accept a connection from this host, or None when it does."""
    host, _, port = host_port.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except socket.gaierror as e:
        return f"does not resolve ({e.strerror or e})"
    except OSError as e:
        return f"does not answer ({e.strerror or e})"
    return None


def codex_home(ws: Workspace, config: Config) -> Check:
    codex = [lv.name for lv in config.agent.all_levels() if lv.argv and cli_of(lv.argv[0]) == "codex"]
    if not codex:
        return Check("codex sandbox", OK, "no codex level")
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex").resolve()
    under = codex_temp(home)
    if shutil.which("bwrap") and under is not None:
        return Check(
            "codex sandbox",
            FAIL,
            f"CODEX_HOME is {home}, under {under}, and a system bwrap is installed: codex then runs every command "
            "through its codex-linux-sandbox helper, which it refuses to set up under a temporary directory, and "
            "every command of every call fails",
            "set CODEX_HOME to a directory outside /tmp (the default ~/.codex works) in the service's environment",
        )
    return Check(
        "codex sandbox", OK, f"CODEX_HOME {home}" + (" (a system bwrap is installed)" if shutil.which("bwrap") else "")
    )
