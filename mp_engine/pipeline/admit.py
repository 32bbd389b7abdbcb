"""Admission: whether an MP that reached the engine (the inbox slot, or a version the
slot lost, queued) runs now. One path for both:

  1. a signature refusal (the pull that brought it): refused, whatever a halt says;
  2. an MP the caller could not read or parse is refused, or held while halted;
  3. from the slot only: an arrival git put back after it already ran is dropped;
  4. the executor it names and the executor's own validation, as in 2;
  5. from the slot only: a cancel request naming it ends it CANCELLED before it starts;
  6. the halt: held, unless its `Approves:` names the halt, which admission then lifts.
An MP whose `Answers:` names the MP the engine is halted on is that MP's answer: it ends
at once and the answered run goes on (answering.py); refused when nothing waits for it.

The verdict says what the caller does next: claim and drive (`Admitted`), record the
refusal (`Refused`), leave it (`Held`), or nothing, admission having ended it (`Ended`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mp_engine.config.load import Config
from mp_engine.core.errors import InvalidMPError
from mp_engine.execute.base import Executor
from mp_engine.inbox.cancel_request import CancelRequest
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.pipeline.answering import take_mp
from mp_engine.pipeline.cancel_waiting import cancel_before_start
from mp_engine.pipeline.context import Action, EngineContext, TickResult
from mp_engine.pipeline.finalize import release_slot
from mp_engine.record.archive import RunArchive
from mp_engine.record.state import SessionState


@dataclass(frozen=True)
class Admitted:
    mp: MicroProject
    executor: Executor


@dataclass(frozen=True)
class Refused:
    error: InvalidMPError


@dataclass(frozen=True)
class Held:
    why: str
    mp: MicroProject | None  # None: held because it is invalid


@dataclass(frozen=True)
class Ended:
    result: TickResult


Verdict = Admitted | Refused | Held | Ended


def admit(
    ctx: EngineContext,
    state: SessionState,
    data: bytes | None,
    parsed: MicroProject | InvalidMPError,
    executors: Mapping[str, Executor],
    *,
    cancels: Sequence[CancelRequest] = (),
    from_slot: bool = True,
) -> Verdict:
    """The verdict on the MP `data`, as the caller `parsed` it (None: the slot's entry
    could not be read, `parsed` says why). `cancels`: the cancel requests waiting; one
    that names the slot's MP ends it before it starts. See the module docstring."""
    refusal = ctx.channel.refusal_for(data) if data is not None else None
    if refusal is not None:  # a signature verdict: refused whatever the halt says
        return Refused(refusal)
    if isinstance(parsed, InvalidMPError):
        return Held(f"invalid MP ({parsed.reason})", None) if state.halt else Refused(parsed)
    mp = parsed
    assert data is not None
    if from_slot and (earlier := ctx.channel.earlier_run(mp.mp_id, mp.sha256, data)) is not None:
        return Ended(_drop_duplicate(ctx, mp, earlier))
    if mp.answers is not None:  # an answer to the MP the engine is halted on (answering.py)
        answered = take_mp(ctx, state, mp, data)
        return Refused(answered) if isinstance(answered, InvalidMPError) else Ended(answered)
    try:
        executor = executor_for(mp, executors, ctx.config.execution.executor)
        executor.validate(mp)
        executor.settings(ctx.config, mp)  # its own settings must apply (a ceiling, a level name)
        check_repo(mp, ctx.config, executor)
    except InvalidMPError as e:
        return Held(f"invalid MP ({e.reason})", None) if state.halt else Refused(e)
    request = next((r for r in cancels if r.mp_id == mp.mp_id), None) if from_slot else None
    if request is not None:
        return Ended(cancel_before_start(ctx, mp, data, request))
    halt = state.halt
    if halt is not None:
        if not (mp.approves and mp.approves in (halt.mp_id, halt.run_id)):
            why = f"its `Approves:` names {mp.approves}" if mp.approves else "it has no `Approves:` header"
            return Held(f"{mp.mp_id} waits: {why}", mp)
        ctx.state.update(halt=None, reason=f"approved by {mp.mp_id}")
        ctx.events.emit("approved", via="mp", approved=halt.mp_id, by=mp.mp_id)
    return Admitted(mp, executor)


def executor_for(mp: MicroProject, executors: Mapping[str, Executor], default: str) -> Executor:
    """The executor the MP names (`Executor:`), or `[execution] executor`."""
    name = mp.executor or default
    executor = executors.get(name)
    if executor is None:
        raise InvalidMPError(
            f"`Executor: {name}` is not available in this engine",
            f"Remove the `Executor: {name}` header to use the shell executor.",
            mp_id=mp.mp_id,
        )
    return executor


def check_repo(mp: MicroProject, config: Config, executor: Executor) -> None:
    """`Repo:` must name a configured `[repos.NAME]` (one that is not is never cloned), for
    an executor that works on other repositories; `Base:` and `Issue:` go with `Repo:`, and
    `Issue:` with a forge. Without these headers nothing changes (issue #41)."""
    name = mp.repo
    if name is None:
        for key in ("Base", "Issue"):
            if key in mp.headers:
                raise InvalidMPError(
                    f"`{key}:` goes with `Repo:`, and this MP has none",
                    f"Add `Repo: NAME` naming a `[repos.NAME]` of the engine's mp-engine.toml, or remove `{key}:`.",
                    mp_id=mp.mp_id,
                )
        return
    repo = config.repos.get(name)
    if repo is None:
        known = ", ".join(sorted(config.repos))
        fix = (
            f"Set `Repo:` to one of the configured repositories: {known}."
            if known
            else f"Add a `[repos.{name}]` table (url, base, land, token_env) to the engine's mp-engine.toml and "
            "restart the engine (docs/PULL_REQUESTS.md)."
        )
        why = f"`Repo: {name}` names a repository this engine is not configured for, so it is not cloned"
        raise InvalidMPError(f"{why} (configured: {known or 'none'})", fix, mp_id=mp.mp_id)
    if "Issue" in mp.headers and repo.forge_kind == "none":
        raise InvalidMPError(
            f"`Issue: {mp.headers['Issue']}` needs a forge to comment on, and [repos.{name}] has none",
            f'Remove `Issue:`, or set [repos.{name}] forge = "github" (api_url for GitHub Enterprise).',
            mp_id=mp.mp_id,
        )
    if not getattr(executor, "works_on_repos", False):
        raise InvalidMPError(
            f"`Repo: {name}` asks the {executor.name} executor to work on another repository, which this "
            "engine's version cannot do yet (issue #41)",
            "Send the MP without `Repo:` to work on the channel's repository.",
            mp_id=mp.mp_id,
        )


def _drop_duplicate(ctx: EngineContext, mp: MicroProject, earlier: RunArchive) -> TickResult:
    """Remove the copy git put back, and commit that removal, instead of running the MP
    a second time."""
    release_slot(ctx, earlier, earlier.ledger())
    detail = f"{mp.mp_id} already ran as {earlier.run_id}; the copy a git operation put back is removed"
    ctx.events.emit("inbox_duplicate_dropped", mp=mp.mp_id, run=earlier.run_id)
    published = ctx.channel.publish(f"{mp.mp_id}: already ran as {earlier.run_id}", None)
    return TickResult(Action.IDLE, mp_id=mp.mp_id, run_id=earlier.run_id, detail=detail, sync=published)
