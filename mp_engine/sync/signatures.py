"""Who may send work: the signature verdict over the commits a pull brings in (issue #3).

With `[git] require_signed = true`, every new commit in `old..new` must carry a good
signature by a key in the allowed-signers file (SSH, via `gpg.ssh.allowedSignersFile`) or
by a GPG key whose fingerprint is listed in `allowed_gpg_keys`. The verdict names the first
offending commit and why; the engine turns it into an ERROR result for the pending MP.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mp_engine.config.sections import GitConfig
from mp_engine.core.errors import ConfigError
from mp_engine.core.workspace import INBOX_DIR, INBOX_FILE
from mp_engine.sync.platform import PlatformSigners, host_file

INBOX_PATH = f"{INBOX_DIR}/{INBOX_FILE}"
# git's %G? codes (git-log(1), "Placeholders that expand to information extracted from the commit").
WHY = {
    "N": "is not signed",
    "B": "has a bad signature (the commit was altered after signing)",
    "U": "is signed by a key that is not in the allowed-signers file",
    "E": "is signed by a key that is not in the allowed-signers file (the signature cannot be checked)",
    "X": "is signed with an expired signature",
    "Y": "is signed by an expired key",
    "R": "is signed by a revoked key",
}


@dataclass(frozen=True)
class CommitCheck:
    sha: str
    code: str  # git's %G?
    key: str  # %GK (key id / ssh fingerprint)
    fingerprint: str  # %GF
    primary: str  # %GP
    subject: str
    touches_inbox: bool
    author: str = ""  # %ae

    def trusted(self, gpg_keys: Sequence[str]) -> bool:
        """A good signature (%G? "G") by an allowed SSH signer, or by a GPG key the engine
        host's keyring trusts; a GPG key listed in `allowed_gpg_keys` is enough on its own."""
        if self.code == "G":
            return True
        wanted = {k.replace(" ", "").upper() for k in gpg_keys}
        return self.code == "U" and bool({self.fingerprint.upper(), self.primary.upper()} & wanted)


@dataclass(frozen=True)
class Verdict:
    """The outcome for one range: `ok`, or a reason naming the first offending commit."""

    ok: bool
    reason: str = ""
    commits: tuple[CommitCheck, ...] = ()


def check_range(
    git: Callable[..., str],
    new: str,
    known: Sequence[str],
    allowed_signers: str,
    gpg_keys: Sequence[str] = (),
    platform: PlatformSigners | None = None,
    root: Path | None = None,
) -> Verdict:
    """Verify every commit reachable from `new` but from none of `known` (`old..new`).

    `git(*args)` runs git in the repository `root` and returns its stdout. A commit no
    allowed key signed may still be trusted as `platform`-signed (sync/platform.py)."""
    revs = [new, *(f"^{k}" for k in known)]
    cfg = ["-c", f"gpg.ssh.allowedSignersFile={allowed_signers}"]
    fmt = "%H%x1f%G?%x1f%GK%x1f%GF%x1f%GP%x1f%ae%x1f%s%x1e"
    out = git(*cfg, "log", f"--format={fmt}", *revs, "--")
    touching = set(git("log", "--format=%H", *revs, "--", INBOX_PATH).split())
    commits = []
    for rec in out.split("\x1e"):
        rec = rec.strip("\n")
        if not rec:
            continue
        sha, code, key, fpr, primary, author, subject = (rec.split("\x1f") + [""] * 7)[:7]
        commits.append(CommitCheck(sha, code, key, fpr, primary, subject, sha in touching, author))
    bad = [c for c in commits if not c.trusted(gpg_keys)]
    why_platform: dict[str, str] = {}
    if bad and platform is not None and root is not None and any(c.code in ("E", "U") for c in bad):
        with platform.keyring() as env:
            for c in [c for c in bad if c.code in ("E", "U")]:
                ok, why_platform[c.sha] = platform.verdict(root, c.sha, c.author, env)
                if ok:
                    bad.remove(c)
    if not bad:
        return Verdict(True, commits=tuple(commits))
    trusted = [c for c in commits if c not in bad]
    tip = commits[0] if commits else None
    first = bad[-1]  # oldest offender (git log lists newest first)
    why = why_platform.get(first.sha) or WHY.get(first.code, f"failed verification (%G? = {first.code})")
    if first.code in ("U", "E") and first.key and not why_platform.get(first.sha):
        why += f" ({first.key})"
    reason = f"commit {first.sha[:12]} ({first.subject!r}) {why}"
    if tip is not None and tip in trusted and first.touches_inbox:
        reason += f"; it changed {INBOX_PATH}, and the signed commit {tip.sha[:12]} on top of it does not vouch for it"
    if len(bad) > 1:
        reason += f"; {len(bad) - 1} more unverified commit(s) up to {new[:12]}"
    return Verdict(False, reason, tuple(commits))


def signers_path(root: Path, cfg: GitConfig) -> Path | None:
    """The allowed-signers file `git.allowed_signers` names, resolved the one way the engine
    and `doctor` both use: `~` expanded, a relative path taken from the workspace root (the
    daemon's working directory may be anything), symlinks resolved. None when unset."""
    if not cfg.allowed_signers:
        return None
    return Path(os.path.realpath(root / Path(cfg.allowed_signers).expanduser()))


def checked_signers_file(root: Path, cfg: GitConfig) -> str:
    """The allowed-signers file for `check_range`, or ConfigError saying what to fix.
    "" when signatures are not required; os.devnull when only GPG keys are listed."""
    if not cfg.require_signed:
        return ""
    if not cfg.allowed_signers and not cfg.allowed_gpg_keys and not cfg.platform_signers:
        raise ConfigError(
            "git.require_signed is true but neither git.allowed_signers nor git.allowed_gpg_keys is set. "
            "Point git.allowed_signers at an ssh allowed-signers file outside the workspace."
        )
    path = signers_path(root, cfg)
    if path is None:
        return os.devnull
    return str(
        host_file(root, "git.allowed_signers", path, "/etc/mp-engine/allowed_signers", "one `principal key` per line")
    )
