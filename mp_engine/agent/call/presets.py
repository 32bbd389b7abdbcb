"""Agent levels that work unattended, as docs/AGENT.md gives them (a test keeps the two
equal): what `mp-engine init --agent NAME` writes, and the CLI versions the conformance
suite (tests/conformance/) passed on, which `mp-engine doctor` compares with the installed
ones."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

# One `[[agent.levels]]` table per preset, as TOML.
PRESETS: dict[str, str] = {
    "claude": """[[agent.levels]]
name = "claude"
argv = ["claude", "-p", "--permission-mode", "acceptEdits", "--allowedTools", "Bash", "--output-format", "json"]
stdin = true
timeout = 1200.0
idle_timeout = 1200.0
env_allow = ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL"]
sandbox_rw = ["~/.claude", "~/.claude.json"]
sandbox_allow_hosts = ["api.anthropic.com:443"]
""",
    "codex": """[[agent.levels]]
name = "codex"
argv = ["codex", "exec", "--json", "--ephemeral", "--sandbox", "workspace-write", "--skip-git-repo-check", "--cd", "{workspace}", "-"]
stdin = true
timeout = 1200.0
idle_timeout = 300.0
env_allow = ["OPENAI_API_KEY", "CODEX_HOME"]
sandbox_rw = ["$CODEX_HOME", "~/.codex"]
sandbox_allow_hosts = ["api.openai.com:443", "chatgpt.com:443"]
""",
    "aider": """[[agent.levels]]
name = "aider"
argv = ["aider", "--yes-always", "--no-auto-commits", "--no-dirty-commits", "--no-gitignore", "--no-check-update", "--no-show-release-notes", "--no-analytics", "--no-show-model-warnings", "--no-pretty", "--no-fancy-input", "--no-detect-urls", "--aiderignore", "{ignore_file}", "--chat-history-file", "{evidence_dir}/aider.chat.md", "--input-history-file", "{evidence_dir}/aider.input.history", "--message-file", "{prompt_file}"]
timeout = 900.0
idle_timeout = 300.0
env_allow = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_BASE", "AIDER_MODEL"]
sandbox_rw = ["~/.aider"]
sandbox_allow_hosts = ["api.openai.com:443", "api.anthropic.com:443"]
""",
    "ollama": """[[agent.levels]]
name = "ollama"
argv = ["ollama", "run", "qwen2.5-coder:7b"]
stdin = true
timeout = 600.0
idle_timeout = 120.0
sandbox_rw = ["~/.ollama"]
sandbox_allow_hosts = ["127.0.0.1:11434"]
""",
}
GATE = """[[agent.levels]]
name = "person"
hard_gate = true
"""
# The versions tests/conformance/ passed on (docs/AGENT.md, "Conformance").
CONFORMANCE = {"claude": ("2.1.197",), "codex": ("0.169.0",), "aider": ("0.86.2",)}
VERSION_RE = re.compile(r"\b(\d+\.\d+\.\d+)\b")


def chain(names: Sequence[str]) -> str:
    """The `[[agent.levels]]` tables for `names` (cheap to expensive, as given), then a
    hard gate: a person takes over what every agent failed."""
    unknown = [n for n in names if n not in PRESETS]
    if unknown:
        raise ValueError(f"no agent preset {', '.join(unknown)}; the presets are {', '.join(PRESETS)}")
    return "\n".join([*(PRESETS[n] for n in names), GATE])


def cli_of(argv0: str) -> str | None:
    """The preset CLI an argv runs (`claude`, `/usr/local/bin/codex`), or None."""
    name = Path(argv0).name.removesuffix(".exe")
    return name if name in PRESETS else None


def installed_version(argv0: str, timeout: float = 15.0) -> str | None:
    """What `<cli> --version` says, as x.y.z; None when it says nothing readable."""
    try:
        proc = subprocess.run(
            [argv0, "--version"], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = VERSION_RE.search(proc.stdout + proc.stderr)
    return m.group(1) if m else None


def codex_temp(home: Path) -> Path | None:
    """The temporary directory `home` (a CODEX_HOME) lies in, by codex's own test (Rust's
    `env::temp_dir()`: $TMPDIR, else /tmp), or None. With a system bwrap installed, codex 0.169
    refuses to set up its sandbox helper there and every command of every call fails."""
    temp = Path(os.environ.get("TMPDIR") or "/tmp").resolve()
    home = home.resolve()
    return temp if home == temp or temp in home.parents else None
