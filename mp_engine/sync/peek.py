"""A look at one file on the remote branch while an MP runs (a cancel request), without
the sync points: no working tree, no tracking ref, no processed ref is touched.

Called from the cancel watch's thread (inbox/cancel_request.py) while the main thread waits for a
step, so it runs its own git processes. `git ls-remote` first (one round trip); only when
the tip moved is it fetched, into `refs/mp-engine/peek`. Under `[git] require_signed` the
file counts only when every commit after the processed tip is signed by an allowed
signer, as the pull that later brings it will require.
"""

from __future__ import annotations

from mp_engine.core.gitcmd import git
from mp_engine.sync.context import PROCESSED_REF, SyncContext
from mp_engine.sync.pull import tip_in
from mp_engine.sync.signatures import check_range

PEEK_REF = "refs/mp-engine/peek"


class RemotePeek:
    def __init__(self, sync: SyncContext, allowed_signers: str):
        self.sync = sync
        self.allowed_signers = allowed_signers
        self._seen: tuple[str, bytes | None] | None = None  # (tip, what the file held there)

    def _git(self, *args: str) -> str:
        return git(self.sync.ws.root, *args, timeout=self.sync.cfg.timeout).out

    def read(self, path: str) -> bytes | None:
        """`path` as the remote branch's tip has it, or None (absent, unsigned, unreachable)."""
        ref = f"refs/heads/{self.sync.cfg.branch}"
        r = git(
            self.sync.ws.root,
            "ls-remote",
            "--heads",
            self.sync.remote_name,
            ref,
            check=False,
            timeout=self.sync.cfg.timeout,
        )
        tip = tip_in(r.out, ref)
        if not r.ok or tip is None:
            return None
        if self._seen is not None and self._seen[0] == tip:
            return self._seen[1]
        # `--refmap=`: no opportunistic update of the tracking ref the pull relies on
        self._git("fetch", "--no-tags", "--quiet", "--refmap=", self.sync.remote_name, f"+{ref}:{PEEK_REF}")
        blob = git(
            self.sync.ws.root,
            "cat-file",
            "blob",
            f"{tip}:{path}",
            check=False,
            text=False,
            timeout=self.sync.cfg.timeout,
        )
        data = blob.out if blob.ok and isinstance(blob.out, bytes) else None
        if data is not None and self.sync.cfg.require_signed:
            processed = git(self.sync.ws.root, "rev-parse", "-q", "--verify", PROCESSED_REF, check=False).out.strip()
            known = [processed] if processed else []
            verdict = check_range(
                self._git,
                tip,
                known,
                self.allowed_signers,
                self.sync.cfg.allowed_gpg_keys,
                platform=self.sync.platform,
                root=self.sync.ws.root,
            )
            if not verdict.ok:
                self.sync.events.emit("cancel_refused", to=tip[:12], reason=verdict.reason)
                data = None
        self._seen = (tip, data)
        return data
