"""Platform signers (issue #18): MPs written through a forge's API, signed with the
forge's key. The tests cannot hold GitHub's private key, so a key made for each test
stands in the platform's role; GitHub's own is checked by its pinned fingerprint."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from mp_engine.config.sections import GitConfig
from mp_engine.core.errors import ConfigError
from mp_engine.sync.platform import KNOWN, SHIPPED, key_fingerprints, platform_signers
from tests.conftest import read_state
from tests.gitutil import clone, engine_workspace, git, make_engine, make_remote, sync_tick

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg is not installed")

MP = "# MP-3.1 Written through the API\n\n```file ran.txt\nran\n```\n"


def gpg(home, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["gpg", "--batch", "--homedir", str(home), *args], input=stdin, capture_output=True, text=True, check=True
    ).stdout


def new_key(home, uid: str) -> str:
    # Short home names: gpg-agent's sockets live in the home, and a Unix socket's path is at
    # most 107 bytes (pytest-xdist's worker folder makes tmp_path longer).
    home.mkdir(mode=0o700)
    gpg(home, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
    return next(line.split(":")[9] for line in gpg(home, "--with-colons", "-K").splitlines() if line.startswith("fpr:"))


@pytest.fixture
def platform(tmp_path):
    """The platform's key (its secret half in its own keyring) and its public key file
    outside the workspace; a second key in the same file that is not a platform signer."""
    keys = tmp_path / "keys"
    keys.mkdir()
    home, other_home = tmp_path / "g-plat", tmp_path / "g-other"
    fpr, other = new_key(home, "Platform <noreply@platform.example>"), new_key(other_home, "Other <other@example>")
    keys_file = keys / "platform-keys.asc"
    keys_file.write_text(gpg(home, "--armor", "--export", fpr) + gpg(other_home, "--armor", "--export", other))
    return {"home": home, "fpr": fpr, "other_home": other_home, "other": other, "file": keys_file}


def channel(tmp_path, platform, monkeypatch, author: str, signer: str = "platform"):
    monkeypatch.setenv("GNUPGHOME", str(tmp_path / "g-none"))  # the host's keyring knows nothing
    (tmp_path / "g-none").mkdir(mode=0o700)
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(
        tmp_path,
        url,
        require_signed=True,
        platform_signers=[platform["fpr"]],
        platform_keys=str(platform["file"]),
        allowed_authors=["orchestrator@example.com"],
    )
    orch = clone(url, tmp_path / "orch")
    (orch / "Claude_Inbox").mkdir(exist_ok=True)
    (orch / "Claude_Inbox" / "incoming_microproject.txt").write_text(MP)
    git(orch, "add", "Claude_Inbox/incoming_microproject.txt")
    # What the platform does for an API call: it authors the commit as the caller and
    # signs it with its own key.
    home, key = {
        "platform": (platform["home"], platform["fpr"]),
        "other": (platform["other_home"], platform["other"]),
    }.get(signer, (None, None))
    args = ["-c", "gpg.format=openpgp", "-c", "user.name=Platform", "-c", "user.email=noreply@platform.example"]
    if key:
        args += ["-c", f"user.signingkey={key}"]
    env = {**os.environ, "GNUPGHOME": str(home or tmp_path), "GIT_AUTHOR_NAME": "Orch", "GIT_AUTHOR_EMAIL": author}
    git(orch, *args, "commit", *(["-S"] if key else []), "--quiet", "-m", "MP-3.1 via the API", env=env)
    git(orch, "push", "--quiet", "origin", "HEAD:main")
    engine = make_engine(ws)
    engine.inbox.settle = 0
    return ws, engine


def test_platform_signed_with_an_allowed_author_runs(tmp_path, platform, monkeypatch):
    ws, engine = channel(tmp_path, platform, monkeypatch, author="Orchestrator@Example.com")
    assert sync_tick(engine).action == "completed"
    assert (ws.root / "ran.txt").read_text() == "ran\n"


@pytest.mark.parametrize(
    ("author", "signer", "rule"),
    [
        ("someone@else.example", "platform", "is not in git.allowed_authors"),
        ("orchestrator@example.com", None, "is not signed"),
        ("orchestrator@example.com", "other", "is signed by a key that is not in the allowed-signers file"),
    ],
)
def test_the_refusal_says_which_rule_failed(tmp_path, platform, monkeypatch, author, signer, rule):
    ws, engine = channel(tmp_path, platform, monkeypatch, author=author, signer=signer)
    assert sync_tick(engine).action == "error"
    assert not (ws.root / "ran.txt").exists()
    text = ws.result_file.read_text()
    assert rule in text, text
    assert read_state(ws).get("halt") is None  # refused before anything ran: no halt


def test_the_configuration_is_refused_with_the_fix_when_it_cannot_be_trusted(tmp_path, platform):
    root = tmp_path / "ws"
    root.mkdir()
    base = {"require_signed": True, "platform_keys": str(platform["file"]), "allowed_authors": ("o@example.com",)}
    ok = platform_signers(root, GitConfig(**base, platform_signers=(platform["fpr"],)))
    assert ok is not None and ok.signers == {platform["fpr"]: platform["fpr"]}
    # GitHub's web-flow key ships with mp-engine, pinned: no key file needed for it.
    github = platform_signers(root, GitConfig(**{**base, "platform_keys": ""}, platform_signers=("github",)))
    assert github is not None and github.signers == {KNOWN["github"]: "github"}
    assert key_fingerprints(str(SHIPPED["github"])) == {KNOWN["github"]}
    stranger = "0123456789ABCDEF0123456789ABCDEF01234567"
    with pytest.raises(ConfigError, match=f"no key with the fingerprint of {stranger} in git.platform_keys"):
        platform_signers(root, GitConfig(**base, platform_signers=(stranger,)))
    with pytest.raises(ConfigError, match="the keys mp-engine ships"):
        platform_signers(root, GitConfig(**{**base, "platform_keys": ""}, platform_signers=(stranger,)))
    with pytest.raises(ConfigError, match="allowed_authors is empty"):
        platform_signers(root, GitConfig(**{**base, "allowed_authors": ()}, platform_signers=(platform["fpr"],)))
    with pytest.raises(ConfigError, match="neither a known platform"):
        platform_signers(root, GitConfig(**base, platform_signers=("gitlab",)))
    inside = root / "keys.asc"
    shutil.copy(platform["file"], inside)
    with pytest.raises(ConfigError, match="lies inside the workspace"):
        platform_signers(root, GitConfig(**{**base, "platform_keys": str(inside)}, platform_signers=(platform["fpr"],)))
    assert platform_signers(root, GitConfig()) is None
