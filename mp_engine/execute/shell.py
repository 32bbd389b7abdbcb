"""The shell executor: run the MP's blocks in document order, then its checks.

Stops at the first failure (MP-1.3: "On any error: STOP immediately"), or when the MP is
cancelled; blocks after it are reported as not run.
"""

from __future__ import annotations

from mp_engine.config.load import Config
from mp_engine.core.errors import InvalidMPError
from mp_engine.execute.base import ExecResult
from mp_engine.execute.steps import StepContext, error_output, report_for, run_block
from mp_engine.inbox.mpfile import MicroProject


class ShellExecutor:
    name = "shell"

    def time_budget(self, config: Config) -> tuple[float, str]:
        return config.execution.mp_timeout, "mp_timeout"

    def validate(self, mp: MicroProject) -> None:
        require_executable(mp)

    def settings(self, config: Config, mp: MicroProject) -> Config:
        return config  # a shell MP's headers (Timeout:, Step-Timeout:) are read where they apply

    def run(self, ctx: StepContext) -> ExecResult:
        result = ExecResult(status="completed")
        sequences = ((result.steps, ctx.mp.steps), (result.checks, ctx.mp.checks))
        for reports, blocks in sequences:
            for block in blocks:
                if result.status != "completed":
                    reports.append(report_for(ctx, block, None))
                    continue
                run = run_block(ctx, block)
                reports.append(run.report)
                if run.cancelled:
                    result.status = "cancelled"
                elif run.interrupted:
                    result.status = "interrupted"
                elif not run.ok:
                    result.status = "failed"
                    result.diagnosis = run.diagnosis
                    result.error_output, result.error_output_ref = error_output(ctx, block)
        return result


def require_executable(mp: MicroProject) -> None:
    """For the shell executor: an MP with no steps and no checks is an error, but for an
    answer (`Answers:`), whose text is the answer."""
    if mp.answers is not None:
        if not any(line.strip() for _, line in mp.body):
            raise InvalidMPError(
                f"the MP answers {mp.answers} but says nothing", "Write the answer below the headers.", mp_id=mp.mp_id
            )
        return
    if not mp.steps and not mp.checks:
        raise InvalidMPError(
            "the MP has nothing to execute: no ```bash, ```sh or ```file block",
            "Put each command in a fenced ```bash block (or set `Executor: agent` for natural-language work).",
            mp_id=mp.mp_id,
        )
