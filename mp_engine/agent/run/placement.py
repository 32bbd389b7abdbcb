"""Where a run's tasks work (issue #40): `InPlace`, one task at a time in the run's own
worktree on `mp/<MP-id>` (each accepted task one commit there), or `Worktrees`, tasks at
once, each in a worktree of its own (worktrees.py), each accepted task integrated onto
`mp/<MP-id>` one at a time (integrator.py). The scheduler is the same for both; a placement
only says where a task's parts work, starts a task's worktree and commits or integrates
its work. Where an attempt's work runs (here or on the fleet) is the `Runner`'s say."""

from __future__ import annotations

import threading
from typing import Protocol

from mp_engine.agent.evidence import Snapshot, Worktree
from mp_engine.agent.judge.checks import Checker
from mp_engine.agent.run.integrator import Integration, Integrator
from mp_engine.agent.run.parts import WorkspaceParts, checks_in, workspace_parts
from mp_engine.agent.run.workbranch import WorkBranch
from mp_engine.agent.run.worktrees import TaskWorktrees
from mp_engine.agent.scope import RunScope, WorkspaceScope


class Placement(Protocol):
    isolated: bool  # tasks in worktrees of their own, integrated one at a time
    limit: int  # tasks at once

    def home(self) -> WorkspaceParts:
        """Parts in the run's own worktree (planning rounds and drift checks work there)."""
        ...

    def parts(self, mt_id: str, base: str | None) -> WorkspaceParts:
        """The task's parts, where it works (after a restart, as the crash left it)."""
        ...

    def where(self, mt_id: str) -> str:
        """The task's workspace, relative to the engine's, for `status`."""
        ...

    def start(self, mt_id: str, *, restart: bool) -> tuple[str, str]:
        """A task's own worktree, fresh or refreshed: (its base commit, its fingerprint)."""
        ...

    def commit(self, mt_id: str, title: str, evidence: str) -> str:
        """A task done in the run's worktree: its one commit on the work branch."""
        ...

    def task_commit(self, mt_id: str, message: str, evidence: str) -> str:
        """An accepted task's one commit on its own branch."""
        ...

    def integrate(self, commit: str, checks: list[int], name: str) -> Integration:
        """`commit` picked onto `mp/<MP-id>`, `checks` run on the result (steps `<name>_check-NNN`)."""
        ...

    def recover(self, pending: dict[str, str]) -> str | None:
        """After a restart: an integration a crash cut short undone (the MT id), or None."""
        ...


class InPlace:
    """One task at a time, in the run's worktree: its parts are made once for the run."""

    isolated = False
    limit = 1

    def __init__(self, scope: RunScope, work: WorkBranch, base: Snapshot):
        self.scope = scope
        self.work = work
        self._parts = workspace_parts(scope, WorkspaceScope.at(work.path, work.map_cache, base))

    def home(self) -> WorkspaceParts:
        return self._parts

    def parts(self, mt_id: str, base: str | None) -> WorkspaceParts:
        return self._parts

    def where(self, mt_id: str) -> str:
        return self.scope.ws.rel(self.work.path)

    def commit(self, mt_id: str, title: str, evidence: str) -> str:
        """The task's one commit on the work branch, pointing at its evidence."""
        made = self.work.commit(f"{self.scope.mp.mp_id} {mt_id}: {title}", f"Evidence: {evidence}")
        self._parts.place.worktree.learn(made.sha, made.tree, made.parent, made.parent_tree)
        return made.sha

    def recover(self, pending: dict[str, str]) -> str | None:
        return None  # nothing is integrated one at a time

    def start(self, mt_id: str, *, restart: bool) -> tuple[str, str]:
        raise AssertionError("one task at a time works in the run's worktree: no task starts a worktree")

    def task_commit(self, mt_id: str, message: str, evidence: str) -> str:
        raise AssertionError("one task at a time commits on the work branch: nothing is integrated")

    def integrate(self, commit: str, checks: list[int], name: str) -> Integration:
        raise AssertionError("one task at a time commits on the work branch: nothing is integrated")


class Worktrees:
    """Tasks at once, each in a worktree of its own from the tip of `mp/<MP-id>`; the
    integration worktree (the run's) brings accepted work onto it one task at a time, its
    checks stopped at once by a cancel or a second signal."""

    isolated = True

    def __init__(self, scope: RunScope, work: WorkBranch, limit: int, check_slots: threading.Semaphore, base: Snapshot):
        self.scope = scope
        self.work = work
        self.base = base
        self.limit = limit
        self.trees = TaskWorktrees(work)
        self.check_slots = check_slots
        integration = checks_in(scope.ctx, work.path, stop=threading.Event(), budget=scope.budget.shared())
        self.integrator = Integrator(work, Checker(integration, scope.mp, check_slots))
        self._parts: dict[str, WorkspaceParts] = {}
        self._home: WorkspaceParts | None = None

    def home(self) -> WorkspaceParts:
        if self._home is None:
            place = WorkspaceScope.at(self.work.path, self.work.map_cache, self.base)
            self._home = workspace_parts(self.scope, place, self.check_slots)
        return self._home

    def start(self, mt_id: str, *, restart: bool) -> tuple[str, str]:
        """The task's worktree from the tip of `mp/<MP-id>` (fresh, or refreshed): the
        commit it started from and its fingerprint there."""
        base = self.trees.refresh(mt_id) if restart else self.trees.start(mt_id)
        self._parts[mt_id] = self._made(mt_id, base)
        return base, Worktree(self.trees.path(mt_id)).snapshot().digest

    def parts(self, mt_id: str, base: str | None) -> WorkspaceParts:
        if mt_id not in self._parts:  # after a restart: the worktree as the crash left it
            self.trees.start(mt_id)
            self._parts[mt_id] = self._made(mt_id, base)
        return self._parts[mt_id]

    def _made(self, mt_id: str, base: str | None) -> WorkspaceParts:
        place = WorkspaceScope.at(self.trees.path(mt_id), self.trees.map_cache(mt_id), Snapshot(base or "", {}))
        return workspace_parts(self.scope, place, self.check_slots)

    def where(self, mt_id: str) -> str:
        return self.scope.ws.rel(self.trees.path(mt_id))

    def commit(self, mt_id: str, title: str, evidence: str) -> str:
        raise AssertionError("a task in a worktree of its own is integrated, not committed on the work branch")

    def task_commit(self, mt_id: str, message: str, evidence: str) -> str:
        """After a crash between this and the integration, the commit already made is the one."""
        return self.trees.commit(mt_id, message, f"Evidence: {evidence}")

    def integrate(self, commit: str, checks: list[int], name: str) -> Integration:
        return self.integrator.integrate(commit, checks, name)

    def recover(self, pending: dict[str, str]) -> str | None:
        return self.integrator.recover(pending)
