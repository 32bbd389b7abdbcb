"""Taking an answer (issue #32; inbox/answer.py): an agent MP that ended asking a person
(a blocked task, the hard gate) is halted on, like any ERROR; an answer that names it
lifts the halt and reopens its run, which the engine then resumes: the same run, on
`mp/<MP-id>`, the task that asked going on with the question and the answer in its
prompt (agent/answers.py). An answer to an MP that is not waiting for one is refused
with the reason (an event; an MP that answers gets it as its ERROR result)."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.api import add_answer
from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox import answer as answer_file
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.pipeline.context import Action, EngineContext, TickResult
from mp_engine.pipeline.finalize import finalize
from mp_engine.record.archive import RunArchive
from mp_engine.record.digest import read_result
from mp_engine.record.outcome import COMPLETED
from mp_engine.record.state import SessionState, Status
from mp_engine.record.unrun import ended_run


def waiting(
    ctx: EngineContext, state: SessionState, mp_id: str, mt: str | None
) -> tuple[RunArchive, dict[str, Any]] | str:
    """The run of `mp_id` and the question it ended on, or why it waits for no answer."""
    halt = state.halt
    if halt is None:
        return f"the engine is not halted: {mp_id} waits for no answer"
    if halt.mp_id != mp_id:
        return f"the engine waits on {halt.mp_id}, not on {mp_id}"
    run = RunArchive(ctx.ws.runs_dir / str(halt.run_id))
    result = read_result(run.dir)
    if result is None:
        return f"the run of {mp_id} ({halt.run_id}) has no result to answer"
    asked = result.get("answerable")
    if not asked:
        return (
            f"{mp_id} did not end asking a question ({(result.get('diagnosis') or {}).get('summary', 'an error')}); "
            f"lift the halt with `Approves: {mp_id}` or `mp-engine approve` instead"
        )
    if mt is not None and mt != asked["mt"]:
        return f"{asked['mt']} of {mp_id} asked, not {mt}"
    return run, asked


def reopen(ctx: EngineContext, mp_id: str, run: RunArchive, asked: dict[str, Any], text: str, source: str) -> None:
    """Give the run the answer and open it again; the next tick resumes it."""
    add_answer(run.dir, mt=asked["mt"], question=asked["question"], answer=text, source=source)
    run.ledger().reopen(f"answered via {source}")
    ctx.state.update(
        halt=None,
        status=Status.RUNNING,
        current=mp_id,
        run_id=run.run_id,
        waiting=None,
        reason=f"{mp_id} answered via {source}",
    )
    ctx.events.emit("mp_answered", mp=mp_id, run=run.run_id, mt=asked["mt"], source=source)


def take_file(ctx: EngineContext, state: SessionState, got: answer_file.Answer | answer_file.NotAnAnswer) -> bool:
    """An answer file (the host's or `Claude_Inbox/answer.txt`): True when it reopened the
    run it answers; refused otherwise. Consumed either way."""
    if isinstance(got, answer_file.NotAnAnswer):
        ctx.events.emit("answer_refused", reason=f"{answer_file.ANSWER_FILE} is no answer: {got}")
        answer_file.consume(getattr(got, "path", None))
        return False
    found = waiting(ctx, state, got.mp_id, got.mt)
    if isinstance(found, str):
        ctx.events.emit("answer_refused", mp=got.mp_id, source=got.source, reason=found)
        answer_file.consume(got.path)
        return False
    run, asked = found
    reopen(ctx, got.mp_id, run, asked, got.text, got.source)
    answer_file.consume(got.path)
    return True


def take_mp(ctx: EngineContext, state: SessionState, mp: MicroProject, data: bytes) -> TickResult | InvalidMPError:
    """An MP whose `Answers:` names the MP the engine is halted on: its text is the answer.
    It ends COMPLETED at once (its work: the answer delivered), then the answered run
    reopens. Refused (ERROR) when that MP waits for no answer."""
    assert mp.answers is not None
    found = waiting(ctx, state, mp.answers, None)
    if isinstance(found, str):
        return InvalidMPError(
            f"{mp.mp_id} answers {mp.answers}, which waits for no answer: {found}",
            "Send the answer when the engine is halted on an MP that asked (its result says so), "
            f"or send this as an ordinary MP without `Answers: {mp.answers}`.",
            mp_id=mp.mp_id,
        )
    text = "\n".join(line for _, line in mp.body).strip()
    if not text:
        return InvalidMPError(
            f"{mp.mp_id} answers {mp.answers} but says nothing", "Write the answer below the headers.", mp_id=mp.mp_id
        )
    run, asked = found
    own, ledger = ended_run(
        ctx.ws,
        ctx.events,
        status=COMPLETED,
        mp_id=mp.mp_id,
        title=mp.title,
        data=data,
        sha256=mp.sha256,
        inbox_entry="delete",
        note=f"The answer to {mp.answers} ({asked['mt']} asked); its run {run.run_id} goes on "
        "and ends with its own result.",
    )
    result = finalize(ctx, own, ledger)
    reopen(ctx, mp.answers, run, asked, text, f"mp:{mp.mp_id}")
    return TickResult(Action.COMPLETED, mp_id=mp.mp_id, run_id=own.run_id, detail=result.detail, sync=result.sync)
