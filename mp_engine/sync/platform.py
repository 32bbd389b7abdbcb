"""Platform signers (issue #18): commits a forge signs with its own key for a user.

An orchestrator that writes MPs through GitHub's API gets commits that GitHub signs with
its "web-flow" key (the contents API when the request names no other author or committer,
GraphQL `createCommitOnBranch` always). Such a signature proves that GitHub made the
commit, not who asked it to; so a platform-signed commit is trusted only when its author
is also one the operator allows (`[git] allowed_authors`).

Verification never uses the host's keyring: the keys (GitHub's ships with mp-engine in
templates/keys/, checked against its pinned fingerprint; others come from `[git]
platform_keys`, outside the workspace) are imported into a fresh, private keyring for each
check, `git verify-commit --raw` runs against it, and only a `VALIDSIG` whose fingerprint
(or primary key's) is one of `[git] platform_signers` counts.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mp_engine.config.sections import GitConfig
from mp_engine.core.errors import ConfigError
from mp_engine.core.gitcmd import git

# GitHub's web-flow key since January 2024 (https://github.com/web-flow.gpg, GPG key id
# B5690EEEBB952194), shipped in templates/keys/ and pinned by its fingerprint.
KNOWN = {"github": "968479A1AFF927E37D1A566BB5690EEEBB952194"}
SHIPPED = {"github": Path(__file__).resolve().parent.parent / "templates" / "keys" / "github-web-flow.asc"}
FPR_RE = re.compile(r"[0-9A-F]{40}")
GPG_TIMEOUT = 30.0


@dataclass(frozen=True)
class PlatformSigners:
    signers: dict[str, str]  # fingerprint -> name ("github", or the fingerprint itself)
    keys_files: tuple[str, ...]
    authors: frozenset[str]  # lower-case e-mail addresses

    @contextmanager
    def keyring(self) -> Iterator[dict[str, str]]:
        """A private keyring holding the key files' keys; the env that points gpg at it."""
        with tempfile.TemporaryDirectory(prefix="mp-engine-platform-") as home:
            os.chmod(home, 0o700)
            for keys_file in self.keys_files:
                _gpg(home, "--import", keys_file)
            yield {"GNUPGHOME": home}

    def verdict(self, root: Path, sha: str, author: str, env: dict[str, str]) -> tuple[bool, str]:
        """(trusted, why not) for commit `sha` by `author`, checked in keyring `env`."""
        r = git(root, "-c", "gpg.program=gpg", "verify-commit", "--raw", sha, check=False, env=env)
        name = None
        for line in (r.err + r.out).splitlines():
            parts = line.split()
            if parts[:2] == ["[GNUPG:]", "VALIDSIG"] and len(parts) >= 3:
                name = self.signers.get(parts[2].upper()) or self.signers.get(parts[-1].upper())
        if name is None:
            return False, ""
        if author.lower() in self.authors:
            return True, ""
        return False, (
            f"is signed by the platform key {name!r} (a commit the platform made for some user), but its author "
            f"<{author}> is not in git.allowed_authors"
        )


def _gpg(home: str, *args: str) -> str:
    proc = subprocess.run(
        ["gpg", "--batch", "--quiet", "--no-tty", "--homedir", home, *args],
        capture_output=True,
        text=True,
        timeout=GPG_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise ConfigError(f"gpg {' '.join(args[:1])} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


def key_fingerprints(keys_file: str) -> set[str]:
    """The primary-key fingerprints in an armored or binary key file."""
    with tempfile.TemporaryDirectory(prefix="mp-engine-platform-") as home:
        os.chmod(home, 0o700)
        out = _gpg(home, "--with-colons", "--import-options", "show-only", "--import", keys_file)
    fprs, primary = set(), False
    for line in out.splitlines():
        kind = line.split(":", 1)[0]
        if kind == "pub":
            primary = True
        elif kind == "fpr" and primary:
            fprs.add(line.split(":")[9].upper())
            primary = False
        elif kind == "sub":
            primary = False
    return fprs


def host_file(root: Path, setting: str, path: Path, example: str, what: str) -> Path:
    """`path`, a file of keys the engine trusts, checked to exist outside the workspace
    (where a push could replace it); ConfigError naming `setting` and the fix otherwise."""
    if path == root or root in path.parents:
        raise ConfigError(
            f"{setting} = {path} lies inside the workspace, so anyone who can push could add "
            f"their own key. Move it outside the repository (e.g. {example})."
        )
    if not path.is_file():
        raise ConfigError(f"{setting} = {path} does not exist. Create it ({what}).")
    return path


def platform_signers(root: Path, cfg: GitConfig) -> PlatformSigners | None:
    """The platform signers `[git]` configures, checked; None when there are none.
    Raises ConfigError with the fix when the configuration cannot be trusted."""
    if not cfg.platform_signers:
        return None
    signers = {}
    for entry in cfg.platform_signers:
        fpr = KNOWN.get(entry.lower()) or entry.replace(" ", "").upper()
        if not FPR_RE.fullmatch(fpr):
            raise ConfigError(
                f"git.platform_signers: {entry!r} is neither a known platform ({', '.join(KNOWN)}) nor a "
                '40-hex-digit GPG fingerprint. Write "github", or the key\'s full fingerprint.'
            )
        signers[fpr] = entry.lower() if entry.lower() in KNOWN else fpr
    if not cfg.allowed_authors:
        raise ConfigError(
            "git.platform_signers is set but git.allowed_authors is empty: a platform's signature proves the "
            "platform made the commit, not who asked it to. List the orchestrator's author e-mail addresses in "
            "git.allowed_authors."
        )
    files = sorted({str(SHIPPED[name]) for name in signers.values() if name in SHIPPED})
    if cfg.platform_keys:
        path = Path(os.path.realpath(root / Path(cfg.platform_keys).expanduser()))
        example, what = "/etc/mp-engine/platform-keys.asc", "the platform's public key, armored"
        files.append(str(host_file(root, "git.platform_keys", path, example, what)))
    have = set().union(*(key_fingerprints(f) for f in files)) if files else set()
    missing = set(signers) - have
    if missing:
        names = ", ".join(f if signers[f] == f else f"{signers[f]} ({f})" for f in sorted(missing))
        where = f"git.platform_keys = {cfg.platform_keys}" if cfg.platform_keys else "the keys mp-engine ships"
        raise ConfigError(
            f"no key with the fingerprint of {names} in {where}. Save that platform's public key outside the "
            "workspace, check its fingerprint, and point git.platform_keys at the file."
        )
    return PlatformSigners(signers, tuple(files), frozenset(a.lower() for a in cfg.allowed_authors))
