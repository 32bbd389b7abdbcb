"""The orchestrator's side of the channel as calls that return data: what `mp-engine mcp`
serves as tools (client/mcp/), built on the same `Sender` as `mp-engine send`.

Each call fetches the remote branch into the sender's working clone (a sparse,
blob-filtered clone, shared by the calls and guarded by one lock) and answers from the
remote's tip: the state the engine pushed, `SYSTEM/results.jsonl`, `RESULT_last.json`, the
run archives. Nothing here needs the engine host.
"""

from __future__ import annotations

import json
import posixpath
import re
import threading
import time
from typing import Any

from mp_engine.client.channel import Already, progress_line, results_at, state_at
from mp_engine.client.remote import read_remote
from mp_engine.client.send import GIT_TIMEOUT, Sender
from mp_engine.core.errors import InvalidMPError
from mp_engine.core.workspace import SYSTEM_DIR
from mp_engine.execute.shell import require_executable
from mp_engine.inbox.header import MP_ID_RE, RUN_ID_RE
from mp_engine.inbox.lines import key_line
from mp_engine.inbox.mpfile import MicroProject, parse
from mp_engine.record.digest import LAST_JSON
from mp_engine.sync.attribution import RUNS_PREFIX
from mp_engine.sync.context import BLOCKED_BRANCH
from mp_engine.sync.session import GitSession
from mp_engine.sync.signatures import INBOX_PATH

LAST_JSON_PATH = f"{SYSTEM_DIR}/{LAST_JSON}"
MAX_WAIT = 25.0  # seconds one wait_result call may hold (clients time out near 30 s)
MAX_FILE_BYTES = 1024 * 1024
SHA256_RE = re.compile(r"[0-9a-f]{64}")


class Orchestrator:
    """One remote channel (`repo`, `branch`), seen from the orchestrator's side."""

    def __init__(self, repo: str, branch: str = "main", poll: float = 1.0):
        self.said: list[str] = []
        # No --force here: a model lifts a halt with approve, it does not queue past one.
        self.sender = Sender(repo, branch, self.said.append, self.said.append, force_hint=None)
        self.poll = poll
        self._lock = threading.Lock()  # one git operation at a time in the shared clone

    # -- reading the remote ----------------------------------------------------------

    def _result_document(self, s: GitSession, tip: str, run_id: str) -> dict[str, Any] | None:
        """RESULT_last.json as it was when run `run_id` ended: the run archive's result.json
        (the same document), or, from an older engine whose archive held another layout,
        RESULT_last.json in the history (it is replaced by later runs)."""
        archived = s.blob(tip, f"{RUNS_PREFIX}{run_id}/result.json") if RUN_ID_RE.match(run_id) else None
        try:
            doc = json.loads(archived) if archived else None
        except ValueError:
            doc = None
        if isinstance(doc, dict) and doc.get("run_id") == run_id and str(doc.get("schema")).startswith("mp-engine/"):
            return doc
        for commit in s.run("log", "-n", "200", "--format=%H", tip, "--", LAST_JSON_PATH).split():
            blob = s.blob(commit, LAST_JSON_PATH)
            try:
                doc = json.loads(blob) if blob else None
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("run_id") == run_id:
                return doc
        return None

    # -- the tools -------------------------------------------------------------------

    def send_mp(self, text: str, *, approves: str | None = None, rerun: bool = False) -> dict[str, Any]:
        """Validate as `check` does, then push; nothing when these bytes wait in the
        remote's inbox or already ran (unless `rerun`)."""
        if approves is not None:
            text = with_approval(text, approves)
        data = text.encode("utf-8")
        try:
            mp = parse(data)
            if (mp.executor or "shell") == "shell":
                require_executable(mp)
        except InvalidMPError as e:
            return {"sent": False, "valid": False, "reason": e.reason, "fix": e.fix, "line": e.line}
        if approves is not None and mp.approves != approves:
            return {
                "sent": False,
                "valid": False,
                "reason": f"the MP approves {mp.approves}, not {approves}",
                "fix": f"Set the header line to `Approves: {approves}`, or call approve with {mp.approves}.",
                "line": None,
            }
        with self._lock:
            self.said.clear()
            sent = self.sender.send(data, mp, force=False, rerun=rerun)
        if isinstance(sent, Already):
            out = {**_ids(mp), "sent": False, "already": sent.what, "note": sent.say(mp.mp_id)}
            return {**out, "result": sent.result} if sent.result else out
        if isinstance(sent, int):
            return {**_ids(mp), "sent": False, "refused": " ".join(self.said).removeprefix("not sent: ")}
        out = {**_ids(mp), "sent": True, "commit": sent[1]}
        if self.said:
            out["note"] = " ".join(self.said)
        return out

    def wait_result(self, ref: str, max_wait_s: float = MAX_WAIT) -> dict[str, Any]:
        """The result of the MP `ref` (an MP id, or an MP's SHA-256) as RESULT_last.json
        has it, or where the engine is, after waiting up to `max_wait_s` (at most 25)."""
        by_sha = bool(SHA256_RE.fullmatch(ref))
        if not by_sha and not MP_ID_RE.fullmatch(ref):
            return {"done": False, "error": f"{ref!r} is neither an MP id (MP-1.4) nor an MP's SHA-256"}
        deadline = time.monotonic() + max(0.0, min(float(max_wait_s), MAX_WAIT))
        clamped = (
            {"note": f"max_wait_s={max_wait_s:g} is above the cap; each call waits at most {MAX_WAIT:g} s"}
            if float(max_wait_s) > MAX_WAIT
            else {}
        )
        while True:
            with self._lock:
                s, tip = self.sender.at_tip()
                try:
                    found = self._lookup(s, tip, ref, by_sha)
                finally:
                    s.close()
            if found.get("done") or "error" in found or time.monotonic() >= deadline:
                return {**found, **clamped}
            time.sleep(min(self.poll, max(0.0, deadline - time.monotonic())))

    def _lookup(self, s: GitSession, tip: str, ref: str, by_sha: bool) -> dict[str, Any]:
        state = state_at(s, tip)
        pending = s.blob(tip, INBOX_PATH)
        pending_mp = _parse_quietly(pending)
        key = "mp_sha256" if by_sha else "mp_id"
        mp_id = ref if not by_sha else (pending_mp.mp_id if pending_mp and pending_mp.sha256 == ref else None)
        # An MP id sent again after an earlier run of the same id: the newer one counts.
        waiting_again = pending_mp is not None and (pending_mp.sha256 == ref if by_sha else pending_mp.mp_id == ref)
        running = state.get("status") == "RUNNING" and mp_id is not None and state.get("current") == mp_id
        entries = [r for r in results_at(s, tip) if r.get(key) == ref]
        # A run a person answered goes on: its earlier result is not the answer to wait for.
        resumed = running and bool(entries) and entries[-1].get("run_id") == state.get("run_id")
        if entries and not (waiting_again and not by_sha) and not resumed:
            entry = entries[-1]
            return {
                "done": True,
                "status": entry.get("status"),
                "result": self._result_document(s, tip, str(entry.get("run_id"))) or entry,
            }
        if not running and not waiting_again and not _queued(s, tip, ref, by_sha):
            return {
                "done": False,
                "status": "unknown",
                "error": f"no MP {ref} was sent or seen: it is not in the remote's inbox (nor queued in its history), "
                "not running, and no result names it. Send it with send_mp first; waiting will not make it appear.",
            }
        progress: dict[str, Any] = {
            "done": False,
            "status": "RUNNING" if running else "waiting",
            "progress": progress_line(state, str(mp_id)),
        }
        engine = self.sender.liveness(s)  # the heartbeat says which step or micro-task
        progress["engine"] = engine
        if running and engine.get("current") == mp_id:
            keys = ("run_id", "step", "micro_task", "micro_tasks", "pull_request")
            progress.update({k: engine[k] for k in keys if k in engine})
        return progress

    def get_status(self) -> dict[str, Any]:
        with self._lock:
            report = read_remote(self.sender)
            s = GitSession(self.sender.working_clone(), GIT_TIMEOUT)
            try:
                side = "refs/heads/" + BLOCKED_BRANCH.format(branch=self.sender.branch)
                tip = s.run("ls-remote", "--heads", "origin", side).split("\t", 1)[0]
            finally:
                s.close()
        if tip:
            report["blocked_branch"] = {
                "ref": side,
                "tip": tip,
                "why": "the engine pushed results here that the branch could not take (an unsigned range or a "
                "conflict); they name the commit to take off and the fix",
            }
        engine = report.get("engine") or {}
        if engine.get("blocked") or engine.get("unpushed"):
            report["not_on_the_remote"] = {k: engine[k] for k in ("blocked", "unpushed") if engine.get(k)}
        halt = (report.get("state") or {}).get("halt")
        if halt:
            report["lift_halt_with"] = (
                f"an MP whose header has `Approves: {halt.get('mp_id')}` (the approve tool sends one), "
                "or `mp-engine approve` on the engine host"
            )
            asked = self._question(str(halt.get("run_id") or ""))
            if asked is not None:  # it ended asking (a plan that waits for approval, issue #42)
                report["question"] = asked
                report["answer_with"] = f"the answer tool with mp_id {halt.get('mp_id')}" + (
                    ": `approve`, `cancel`, or what to change" if asked.get("kind") == "plan_review" else ""
                )
        return report

    def _question(self, run_id: str) -> dict[str, Any] | None:
        """What the halted run asks a person (its result's `answerable`), or None."""
        if not RUN_ID_RE.match(run_id):
            return None
        with self._lock:
            s, tip = self.sender.at_tip()
            try:
                doc = self._result_document(s, tip, run_id)
            finally:
                s.close()
        asked = (doc or {}).get("answerable")
        return asked if isinstance(asked, dict) else None

    def list_results(self, limit: int = 20) -> dict[str, Any]:
        with self._lock:
            s, tip = self.sender.at_tip()
            try:
                entries = results_at(s, tip)
            finally:
                s.close()
        limit = max(0, min(int(limit), 500))
        return {"count": len(entries), "results": list(reversed(entries[-limit:])) if limit else []}

    def get_run_file(self, run_id: str, path: str, max_bytes: int = 64 * 1024) -> dict[str, Any]:
        """One archived file of a run, confined to `SYSTEM/runs/<run_id>/`."""
        if not RUN_ID_RE.match(run_id):
            return {"error": f"{run_id!r} is not a run id (like 20261125T120000Z-MP-1.4)"}
        clean = posixpath.normpath(path.replace("\\", "/")).lstrip("/")
        if clean in ("", ".") or clean.startswith("..") or "\0" in clean:
            return {"error": f"{path!r} is not a path inside the run's directory"}
        max_bytes = max(1, min(int(max_bytes), MAX_FILE_BYTES))
        with self._lock:
            s, tip = self.sender.at_tip()
            try:
                blob = s.blob(tip, f"{RUNS_PREFIX}{run_id}/{clean}")
                listing = (
                    None if blob is not None else s.run("ls-tree", "--name-only", "-r", tip, f"{RUNS_PREFIX}{run_id}/")
                )
            finally:
                s.close()
        if blob is None:
            names = [n.removeprefix(f"{RUNS_PREFIX}{run_id}/") for n in (listing or "").split()]
            if not names:
                return {"error": f"no run {run_id} on the remote (list_results names the runs)"}
            return {"error": f"no file {clean} in run {run_id}", "files": names[:200]}
        return {
            "run_id": run_id,
            "path": clean,
            "size": len(blob),
            "truncated": len(blob) > max_bytes,
            "text": blob[:max_bytes].decode("utf-8", errors="replace"),
        }

    def cancel(self, mp_id: str) -> dict[str, Any]:
        if not MP_ID_RE.fullmatch(mp_id):
            return {"sent": False, "error": f"{mp_id!r} is not an MP id; give one like MP-1.4"}
        with self._lock:
            self.said.clear()
            sent = self.sender.cancel(mp_id)
        if isinstance(sent, Already):
            status = (sent.result or {}).get("status")
            return {
                "sent": False,
                "already": "finished",
                "status": status,
                "note": sent.say(mp_id),
                "result": sent.result,
            }
        if isinstance(sent, int):
            return {"sent": False, "error": " ".join(self.said)}
        return {
            "sent": True,
            "mp_id": mp_id,
            "commit": sent[1],
            "waiting_mp_sha256": sent[2],
            "note": " ".join(self.said),
        }

    def answer(self, mp_id: str, text: str) -> dict[str, Any]:
        if not MP_ID_RE.fullmatch(mp_id):
            return {"sent": False, "error": f"{mp_id!r} is not an MP id; give one like MP-1.4"}
        if not text.strip():
            return {"sent": False, "error": "the answer is empty"}
        with self._lock:
            self.said.clear()
            sent = self.sender.answer(mp_id, text, None)
        if isinstance(sent, int):
            return {"sent": False, "error": " ".join(self.said)}
        return {"sent": True, "mp_id": mp_id, "commit": sent[1], "note": "its run goes on; wait_result waits for it"}


def _ids(mp: MicroProject) -> dict[str, Any]:
    return {"mp_id": mp.mp_id, "sha256": mp.sha256}


def _queued(s: GitSession, tip: str, ref: str, by_sha: bool, depth: int = 20) -> bool:
    """Whether one of the last `depth` MPs sent to the inbox is `ref`: an MP sent while
    another waited is queued in the branch's history, not in the inbox at the tip."""
    for commit in s.run("log", "-n", str(depth), "--format=%H", tip, "--", INBOX_PATH).split():
        mp = _parse_quietly(s.blob(commit, INBOX_PATH))
        if mp is not None and (mp.sha256 if by_sha else mp.mp_id) == ref:
            return True
    return False


def _parse_quietly(data: bytes | None) -> MicroProject | None:
    if not data:
        return None
    try:
        return parse(data)
    except InvalidMPError:
        return None


def with_approval(text: str, mp_id: str) -> str:
    """`text` with the header line `Approves: mp_id` directly under its title, unless its
    header lines have an `Approves:` already (send_mp then checks it names `mp_id`)."""
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return text
    j = first + 1
    while j < len(lines) and (key := key_line(lines[j])) is not None:
        if key[0].lower() == "approves":
            return text
        j += 1
    return "\n".join([*lines[: first + 1], f"Approves: {mp_id}", *lines[first + 1 :]])
