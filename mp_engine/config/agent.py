"""`[agent]`: the agent executor's levels, routes, planner and reflector, and the loop's
budgets, breakers and limits (docs/AGENT.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mp_engine.config.section import Section


class AgentLevel(Section):
    """One level of the agent escalation chain (docs/AGENT.md)."""

    name: str = Field(min_length=1)
    argv: tuple[str, ...] = Field(
        (), description="command; placeholders {prompt} {prompt_file} {workspace} {mt_id} {evidence_dir} {ignore_file}"
    )
    hard_gate: bool = Field(False, description="stop here and wait for approval (last level only)")
    model: str = Field("", description="model id recorded in distillation candidates (default: name)")
    stdin: bool = Field(False, description="feed the prompt on stdin")
    timeout: float = Field(900.0, gt=0, description="seconds one agent call may take")
    idle_timeout: float = Field(300.0, gt=0, description="seconds without output before the call counts as hung")
    env_allow: tuple[str, ...] = Field((), description="environment variables passed to the agent")
    max_parallel: int | None = Field(
        None, ge=1, description="calls of this level at once in a parallel run (a local model may take one)"
    )
    sandbox: Literal["none", "os"] | None = Field(None, description="this level's calls; default: [agent] sandbox")
    sandbox_rw: tuple[str, ...] = Field(
        (), description="the CLI's own state, writable in the sandbox (~/.claude, $CODEX_HOME)"
    )
    sandbox_allow_hosts: tuple[str, ...] = Field(
        (), description="host:port this level's calls may reach in the sandbox (its model API)"
    )
    max_turns: int | None = Field(
        None,
        ge=1,
        description="model turns one call may take (claude's --max-turns, or {max_turns} in argv); the CLI's report is checked",
    )

    @model_validator(mode="after")
    def _runnable(self) -> AgentLevel:
        if self.hard_gate:
            return self
        if self.max_turns is not None and not _takes_turns(self.argv):
            raise ValueError(
                f"level {self.name!r} has max_turns, but its CLI takes no turn limit the engine knows; "
                "use claude (which gets --max-turns), put {max_turns} in argv where the CLI takes it, or remove max_turns"
            )
        if not self.argv:
            raise ValueError(f"level {self.name!r} has no argv; give the agent command or set hard_gate = true")
        joined = " ".join(self.argv)
        if not self.stdin and "{prompt}" not in joined and "{prompt_file}" not in joined:
            raise ValueError(
                f"level {self.name!r} never passes the prompt; put {{prompt}} or {{prompt_file}} in argv or set stdin = true"
            )
        return self


def _takes_turns(argv: tuple[str, ...]) -> bool:
    """Whether a turn limit can reach this CLI: claude's `--max-turns`, or `{max_turns}` in argv."""
    return bool(argv) and (
        argv[0].rsplit("/", 1)[-1] in ("claude", "claude.exe") or any("{max_turns}" in a for a in argv)
    )


def _check_chain(levels: tuple[AgentLevel, ...], where: str) -> None:
    names = [lv.name for lv in levels]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: level names must be unique, got {names}")
    gates = [i for i, lv in enumerate(levels) if lv.hard_gate]
    if gates and gates != [len(levels) - 1]:
        raise ValueError(f"{where}: hard_gate is allowed only once, as the last level")
    if gates and len(levels) == 1:
        raise ValueError(f"{where}: the chain needs at least one agent level before the hard gate")


class AgentRoute(Section):
    """`[[agent.routes]]`: the micro-tasks tagged `[domain]` run on a chain of their own
    (issue #17); the others use `[agent] levels`."""

    domain: str = Field(pattern=r"^[A-Za-z][\w-]*$", description="the tag of a list item: `1. [docs] ...`")
    levels: tuple[AgentLevel, ...] = Field(min_length=1, description="this domain's escalation chain")

    @model_validator(mode="after")
    def _chain(self) -> AgentRoute:
        _check_chain(self.levels, f"route {self.domain!r}")
        return self


class ModelPrice(Section):
    """`[agent.prices."MODEL"]`: US dollars per million tokens of a model whose CLI reports tokens only."""

    input: float = Field(ge=0, description="dollars per million input tokens")
    output: float = Field(ge=0, description="dollars per million output tokens")
    cache_read: float | None = Field(None, ge=0, description="per million cached input tokens read (default: input)")
    cache_write: float | None = Field(
        None, ge=0, description="per million tokens written to the cache (default: input)"
    )


class AgentConfig(Section):
    """The agent executor (issue #4, docs/AGENT.md). An empty chain means NEED_INFO."""

    levels: tuple[AgentLevel, ...] = ()
    routes: tuple[AgentRoute, ...] = Field((), description="chains for micro-tasks tagged with a domain")
    fail_threshold: int = Field(3, ge=1, description="failed iterations at a level before escalating")
    max_iterations: int = Field(30, ge=1, description="agent iterations per MP, all micro-tasks together")
    wall_budget: float = Field(3600.0, gt=0, description="active seconds per MP when it has no `Timeout:`")
    calls_per_hour: int = Field(100, ge=1, description="agent calls in any rolling hour, across restarts")
    require_checks: bool = Field(True, description="an agent MP without Validate checks ends in NEED_INFO")
    learnings_max_bytes: int = Field(16384, ge=1024, description="learnings file size that triggers compaction")
    output_tail_bytes: int = Field(2000, ge=100, description="tail of each failing check shown in the next prompt")
    memory: bool = Field(True, description="keep SYSTEM/memory.md: lessons of earlier MPs, in every agent prompt")
    max_disk_used: float = Field(
        0.95,
        gt=0,
        le=1,
        description="the run stops (BACKPRESSURE) before an iteration when the workspace's disk is fuller (1: never)",
    )
    distill: bool = Field(
        True, description="write distillation candidates to SYSTEM/distill/ (the spec's `enable_distillation`)"
    )
    memory_max_bytes: int = Field(
        8192, ge=1024, description="SYSTEM/memory.md's size; the oldest MPs' lessons go first"
    )
    token_budget: int = Field(
        8000, ge=0, description="estimated prompt tokens; the task's files and the repository map fill what is left"
    )
    max_no_progress: int = Field(3, ge=1)
    max_same_error: int = Field(5, ge=1)
    max_missing_status: int = Field(2, ge=1)
    max_test_only: int = Field(3, ge=1)
    divergence_window: int = Field(
        3, ge=2, description="residuals in a row, each above the one before, that mean divergence (Phuc's rule: 3)"
    )
    done_signals: int = Field(
        1, ge=1, description="iterations in a row an agent must claim a micro-task done (Loopr's done signals)"
    )
    transient_retries: int = Field(3, ge=0, description="retries of a call that hit a transient outage")
    transient_backoff: float = Field(10.0, ge=0, description="first backoff in seconds; doubles per retry")
    usage_limit_wait: float = Field(1800.0, gt=0, description="wait after a usage limit without a parsable reset")
    rate_limit_wait: float = Field(
        60.0, gt=0, description="wait after a rate limit (429, per minute) without a parsable reset"
    )
    plan: Literal["list", "auto"] = Field(
        "list", description="`auto`: the planner level plans every agent MP (an MP's `Plan:` header overrides)"
    )
    planner: AgentLevel | None = Field(None, description="`[agent.planner]`: the level that answers with a plan")
    reflector: AgentLevel | None = Field(
        None, description="`[agent.reflector]`: the level asked at each drift check whether the work serves the goal"
    )
    max_replans: int = Field(2, ge=0, description="re-plans per MP after a task exhausts its chain or drift is found")
    land: Literal["merge", "branch"] = Field(
        "merge", description="an EXACT run's work branch: merged into the channel branch, or left for review"
    )
    max_parallel: int = Field(
        1, ge=1, le=64, description="micro-tasks of one MP at once, each in its own worktree (1: one at a time)"
    )
    max_parallel_checks: int | None = Field(
        None, ge=1, description="checks running at once in a parallel run (default: the CPU count)"
    )
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        description="dollars the MP's agent calls may cost, as their CLIs report it (a budget, like wall_budget)",
    )
    max_integration_retries: int = Field(
        2, ge=0, description="integration failures (conflict, broken check) before a task is tried alone"
    )
    ceilings: tuple[Literal["max_iterations", "wall_budget", "max_cost_usd"], ...] = Field(
        (),
        description="limits an MP's headers may lower but never raise (Max-Iterations:, Wall-Budget:, Max-Cost-USD:)",
    )
    sandbox: Literal["none", "os"] = Field(
        "none", description='"os": agent calls and checks run under bubblewrap (docs/AGENT.md, "The sandbox")'
    )
    sandbox_hide: tuple[str, ...] = Field((), description="more paths the sandbox hides (~/.aws is hidden already)")
    sandbox_allow_hosts: tuple[str, ...] = Field(
        (), description="host:port every sandboxed call and check may reach (the levels add their own)"
    )
    # Issue #42: the files that judge the work, and budgets across every MP.
    protected_paths: tuple[str, ...] = Field(
        (), description="globs the agent may not change (besides the checks' files and CI configuration)"
    )
    daily_cost_usd: float | None = Field(
        None, gt=0, description="dollars every agent call of every MP may cost in a calendar day"
    )
    monthly_cost_usd: float | None = Field(
        None, gt=0, description="dollars every agent call of every MP may cost in a calendar month"
    )
    budget_clock: str = Field(
        "local", description='the days and months of the budgets: "local" (the host\'s time zone), "UTC" or a zone name'
    )
    on_budget: Literal["wait", "end"] = Field(
        "wait", description="a budget spent: the MP waits for the reset, or ends (BACKPRESSURE)"
    )
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict, description="`[agent.prices.MODEL]`: what tokens cost where a CLI reports no dollars"
    )
    # Gates a person and a second model hold (issue #42): docs/AGENT.md, "Plan approval" and "The reviewer".
    plan_review: bool = Field(
        False, description="a planned MP's plan waits for a person's `approve` before any task starts (`Plan: review`)"
    )
    reviewer: AgentLevel | None = Field(
        None, description="`[agent.reviewer]`: the level that reviews verified work before it lands (read-only)"
    )
    review_rounds: int = Field(
        1, ge=0, description="times the reviewer's requested changes go back to the tasks they name"
    )

    @model_validator(mode="after")
    def _chain(self) -> AgentConfig:
        _check_chain(self.levels, "[agent] levels")
        domains = [r.domain.lower() for r in self.routes]  # tags match without case
        if len(set(domains)) != len(domains):
            raise ValueError(f"route domains must be unique, got {domains}")
        for host in (*self.sandbox_allow_hosts, *(h for lv in self.all_levels() for h in lv.sandbox_allow_hosts)):
            if not host.strip() or " " in host.strip():
                raise ValueError(f"sandbox_allow_hosts: {host!r} is not host:port (like api.openai.com:443)")
        for role in ("planner", "reflector", "reviewer"):
            lv = getattr(self, role)
            if lv is not None and lv.hard_gate:
                raise ValueError(f"[agent.{role}] must call an agent; a hard gate cannot plan, reflect or review")
        _check_clock(self.budget_clock)
        return self

    def all_levels(self) -> tuple[AgentLevel, ...]:
        """Every level that may be called: the chain, the routes', the planner, the reflector,
        the reviewer."""
        roles = tuple(lv for lv in (self.planner, self.reflector, self.reviewer) if lv is not None)
        return (*self.levels, *(lv for r in self.routes for lv in r.levels), *roles)

    def sandboxed(self, level: AgentLevel | None = None) -> bool:
        """Whether `level`'s calls (None: the checks) run in the sandbox."""
        mode = (level.sandbox if level is not None else None) or self.sandbox
        return mode == "os"

    def wants_sandbox(self) -> bool:
        """Whether anything runs in the sandbox: then it must work on this host."""
        return self.sandboxed() or any(self.sandboxed(lv) for lv in self.all_levels() if not lv.hard_gate)


def _check_clock(name: str) -> None:
    """`budget_clock`: "local", "UTC" or a zone the host knows."""
    if name in ("local", "UTC"):
        return
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f'budget_clock: {name!r} is not "local", "UTC" or a time zone name like "Europe/Berlin"'
        ) from None
