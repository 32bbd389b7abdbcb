"""Who may send work: `require_signed` with SSH keys made by ssh-keygen for each test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import events, read_state
from tests.gitutil import (
    HELLO,
    clone,
    engine_workspace,
    git,
    make_engine,
    make_remote,
    push_file,
    push_mp,
    remote_log,
    sync_tick,
)

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")

MARKER_MP = "# MP-1.1 Must not run unless trusted\n\n```file ran.txt\nran\n```\n"


def keygen(dir: Path, name: str) -> Path:
    key = dir / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key


def sign_with(repo: Path, key: Path | None) -> None:
    if key is None:
        git(repo, "config", "commit.gpgsign", "false")
        return
    git(repo, "config", "gpg.format", "ssh")
    git(repo, "config", "user.signingkey", str(key) + ".pub")
    git(repo, "config", "commit.gpgsign", "true")


@pytest.fixture
def signed_channel(tmp_path):
    keys = tmp_path / "keys"  # outside every repository
    keys.mkdir()
    trusted, stranger = keygen(keys, "orchestrator"), keygen(keys, "stranger")
    signers = keys / "allowed_signers"
    signers.write_text(f"orchestrator@example {(keys / 'orchestrator.pub').read_text()}")
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url, require_signed=True, allowed_signers=str(signers))
    orch = clone(url, tmp_path / "orch")
    engine = make_engine(ws)
    engine.inbox.settle = 0
    return bare, ws, orch, engine, trusted, stranger


def refused(ws, engine, why: str) -> None:
    result = sync_tick(engine)
    assert result.action == "error", result
    assert not (ws.root / "ran.txt").exists()  # nothing was executed
    text = ws.result_file.read_text()
    assert "Error-Kind: invalid_mp" in text and why in text, text
    # Refused before anything ran: an ERROR result, REFUSED in the JSON form, and no halt.
    assert read_state(ws)["status"] == "ONLINE" and read_state(ws).get("halt") is None
    assert json.loads((ws.system_dir / "RESULT_last.json").read_text())["status"] == "REFUSED"
    assert events(ws, "sync_refused")


def test_an_mp_signed_by_an_allowed_key_runs(signed_channel):
    bare, ws, orch, engine, trusted, _ = signed_channel
    sign_with(orch, trusted)
    push_mp(orch, HELLO)
    assert sync_tick(engine).action == "completed"
    assert remote_log(bare)[0] == "MP-0.1: COMPLETED"


def test_an_unsigned_mp_is_refused(signed_channel):
    _bare, ws, orch, engine, _trusted, _ = signed_channel
    sign_with(orch, None)
    push_mp(orch, MARKER_MP)
    refused(ws, engine, "is not signed")


def test_an_mp_signed_by_an_unknown_key_is_refused(signed_channel):
    _bare, ws, orch, engine, _trusted, stranger = signed_channel
    sign_with(orch, stranger)
    push_mp(orch, MARKER_MP)
    refused(ws, engine, "not in the allowed-signers file")


def test_a_signed_tip_over_an_unsigned_inbox_commit_is_refused(signed_channel):
    _bare, ws, orch, engine, trusted, _ = signed_channel
    sign_with(orch, None)
    (orch / "Claude_Inbox" / "incoming_microproject.txt").write_text(MARKER_MP)
    git(orch, "add", "-A")
    git(orch, "commit", "-qm", "unsigned MP")
    sign_with(orch, trusted)
    (orch / "README.md").write_text("innocent\n")
    git(orch, "add", "README.md")
    git(orch, "commit", "-qm", "signed tip")
    git(orch, "push", "-q", "origin", "HEAD:main")
    refused(ws, engine, "does not vouch for it")


def test_a_refused_range_stays_refused_until_the_unsigned_commit_is_gone(signed_channel):
    bare, ws, orch, engine, trusted, _ = signed_channel
    before = git(orch, "rev-parse", "HEAD")
    sign_with(orch, None)
    push_mp(orch, MARKER_MP)
    refused(ws, engine, "is not signed")
    assert "MP-1.1 Must not run unless trusted, which did not run" in ws.result_file.read_text()
    # The refusal result cannot go onto the orchestrator's branch: it waits on the side branch.
    assert remote_log(bare, "mp-engine/blocked/main")[0] == "MP-1.1: ERROR (unsigned commits refused)"
    # A signed commit on top does not vouch for the unsigned one: still refused, nothing runs.
    sign_with(orch, trusted)
    push_mp(orch, "# MP-1.2 Signed\n\n```bash\necho ok > ok.txt\n```\n")
    assert sync_tick(engine).action == "error" and not (ws.root / "ok.txt").exists()
    # The orchestrator takes the unsigned commit off and pushes the work again, signed.
    git(orch, "reset", "--quiet", "--hard", before)
    git(orch, "push", "--quiet", "--force", "origin", "HEAD:main")
    push_mp(orch, "# MP-1.2 Signed\n\n```bash\necho ok > ok.txt\n```\n")
    assert sync_tick(engine).action == "completed" and (ws.root / "ok.txt").exists()
    assert not (ws.root / "ran.txt").exists()


def test_an_unsigned_commit_without_an_mp_is_not_integrated_either(signed_channel):
    """Issue #20: an unsigned change to mp-engine.toml must not reach the next start."""
    _bare, ws, orch, engine, _trusted, _ = signed_channel
    config = ws.config_file.read_text()
    sign_with(orch, None)
    push_file(orch, "mp-engine.toml", config.replace("env_allow = []", 'env_allow = ["AWS_SECRET_ACCESS_KEY"]'), "tune")
    result = sync_tick(engine)
    assert result.action == "error" and ws.config_file.read_text() == config
    assert "tune" in ws.result_file.read_text() and read_state(ws).get("halt") is None


def _gpg(home: Path, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        ["gpg", "--batch", "--homedir", str(home), *args], input=stdin, capture_output=True, text=True, check=True
    )
    return proc.stdout


@pytest.fixture
def gpg_keys(tmp_path):
    """An orchestrator key (secret in its own keyring) and an engine keyring that only has
    the public half, untrusted: what a real engine host has after `gpg --import`."""
    if shutil.which("gpg") is None:
        pytest.skip("gpg is not installed")
    orch_home, engine_home = tmp_path / "g-orch", tmp_path / "g-eng"
    for home in (orch_home, engine_home):
        home.mkdir(mode=0o700)
    _gpg(orch_home, "--passphrase", "", "--quick-gen-key", "Orchestrator <orch@example>", "ed25519", "sign", "never")
    fpr = next(
        line.split(":")[9]
        for line in _gpg(orch_home, "--with-colons", "--list-secret-keys").splitlines()
        if line.startswith("fpr:")
    )
    _gpg(engine_home, "--import", stdin=_gpg(orch_home, "--armor", "--export", fpr))
    return orch_home, engine_home, fpr


def _gpg_channel(tmp_path, monkeypatch, gpg_keys, allowed: list[str]):
    orch_home, engine_home, fpr = gpg_keys
    monkeypatch.setenv("GNUPGHOME", str(engine_home))  # the engine verifies with its own keyring
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url, require_signed=True, allowed_gpg_keys=allowed)
    orch = clone(url, tmp_path / "orch")
    git(orch, "config", "gpg.format", "openpgp")
    git(orch, "config", "user.signingkey", fpr)
    path = orch / "Claude_Inbox" / "incoming_microproject.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MARKER_MP)
    env = {**os.environ, "GNUPGHOME": str(orch_home)}
    git(orch, "add", "--", "Claude_Inbox/incoming_microproject.txt")
    git(orch, "commit", "-S", "--quiet", "-m", "send MP", env=env)
    git(orch, "push", "--quiet", "origin", "HEAD:main")
    engine = make_engine(ws)
    engine.inbox.settle = 0
    return ws, engine


def test_an_mp_signed_with_a_listed_gpg_key_runs(tmp_path, monkeypatch, gpg_keys):
    ws, engine = _gpg_channel(tmp_path, monkeypatch, gpg_keys, allowed=[gpg_keys[2]])
    result = sync_tick(engine)
    assert result.action == "completed", result
    assert (ws.root / "ran.txt").read_text() == "ran\n"


def test_an_mp_signed_with_an_unlisted_gpg_key_is_refused(tmp_path, monkeypatch, gpg_keys):
    ws, engine = _gpg_channel(tmp_path, monkeypatch, gpg_keys, allowed=["0" * 40])
    refused(ws, engine, "is signed by a key that is not in the allowed-signers file")


def test_the_allowed_signers_file_is_found_by_one_rule(tmp_path, monkeypatch):
    """Relative to the workspace (not the daemon's working directory), outside it, existing."""
    from mp_engine.config.sections import GitConfig
    from mp_engine.core.errors import ConfigError
    from mp_engine.sync.signatures import checked_signers_file, signers_path

    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "allowed_signers"
    outside.write_text("me ssh-ed25519 AAAA\n")
    monkeypatch.chdir("/")
    cfg = GitConfig(require_signed=True, allowed_signers="../allowed_signers")
    assert signers_path(root, cfg) == outside and checked_signers_file(root, cfg) == str(outside)
    with pytest.raises(ConfigError, match="lies inside the workspace"):
        checked_signers_file(root, GitConfig(require_signed=True, allowed_signers="keys"))
    with pytest.raises(ConfigError, match="does not exist"):
        checked_signers_file(root, GitConfig(require_signed=True, allowed_signers=str(tmp_path / "nope")))
    with pytest.raises(ConfigError, match="neither git.allowed_signers nor git.allowed_gpg_keys"):
        checked_signers_file(root, GitConfig(require_signed=True))
    assert checked_signers_file(root, GitConfig(require_signed=True, allowed_gpg_keys=["ABCD"])) == os.devnull
    assert checked_signers_file(root, GitConfig(require_signed=False, allowed_signers="whatever")) == ""
