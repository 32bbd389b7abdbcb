"""The orchestrator's side of the command line: `send` and `mcp`, which run anywhere that
can reach the channel repository, not on the engine host. `cli.py` adds them to its group;
the bodies are `commands/send.py` and `commands/mcp.py`, imported when they run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mp_engine.commands import say_error as _err


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@click.option("--cancel", "cancel_id", metavar="MP-ID", help="Instead of sending FILE, ask the engine to cancel MP-ID.")
@click.option("--answer", "answer_id", metavar="MP-ID", help="FILE is the answer to MP-ID, which asked a question.")
@click.option("--repo", required=True, metavar="URL_OR_PATH", help="The channel repository, or a working clone of it.")
@click.option("--branch", default="main", show_default=True, help="Branch the engine watches.")
@click.option("--wait", is_flag=True, help="Wait for the result, print it, exit 0 COMPLETED / 1 ERROR.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds --wait waits (then exit 7).")
@click.option("--poll", type=float, default=2.0, show_default=True, help="Seconds between checks while waiting.")
@click.option("--force", is_flag=True, help="Send even though the engine is halted and the MP does not approve it.")
def send(file: Path | None, cancel_id: str | None, answer_id: str | None, repo: str, **opts: Any) -> int:
    """Send an MP to an engine through its git remote (the orchestrator's side).

    Validates FILE as `check` does, reads the remote's state, commits FILE as
    Claude_Inbox/incoming_microproject.txt in a working clone of --repo and pushes. MPs
    sent while another waits or runs are queued (git history is the queue). Exit codes:
    0 sent / COMPLETED, 1 invalid MP / ERROR, 6 the engine is halted and the MP does not
    approve the halt (nothing sent), 7 --wait timed out, 8 git failed (docs/GIT.md).

    \b
    With --cancel MP-ID, commits Claude_Inbox/cancel_request.txt naming MP-ID instead:
    the engine stops it (running or waiting) with a CANCELLED result and no halt;
    --wait then exits 0 on CANCELLED.

    \b
    With --answer MP-ID, FILE is the answer to an agent MP that ended asking a question
    (the engine is halted on it): commits Claude_Inbox/answer.txt; the same run goes on,
    and --wait waits for its result.

    \b
    Example:
      mp-engine send examples/hello.md --repo git@github.com:me/mp-channel.git --wait
      mp-engine send --cancel MP-1.4 --repo git@github.com:me/mp-channel.git --wait
    """
    from mp_engine.commands.send import send_mp  # lazy: see the module docstring
    from mp_engine.commands.send_request import send_answer, send_cancel

    if (file is None) == (cancel_id is None) or (answer_id and (cancel_id or file is None)):
        raise click.UsageError("give FILE to send an MP, --cancel MP-ID to cancel one, or --answer MP-ID FILE")
    force = opts.pop("force")  # the rest: branch, wait, timeout, poll
    if answer_id is not None:
        assert file is not None
        text = file.read_text(encoding="utf-8")
        return send_answer(answer_id, text, repo, **opts, echo=click.echo, err=_err)
    if cancel_id is not None:
        return send_cancel(cancel_id, repo, **opts, echo=click.echo, err=_err)
    assert file is not None
    return send_mp(file, repo, force=force, **opts, echo=click.echo, err=_err)


@click.command()
@click.option("--repo", required=True, metavar="URL_OR_PATH", help="The engine's git remote (as for `send`).")
@click.option("--branch", default="main", show_default=True, help="Branch that carries MPs and results.")
@click.option("--http", metavar="HOST:PORT", help="Serve streamable HTTP here instead of stdio (127.0.0.1:8765).")
@click.option("--token", metavar="TOKEN", help="Bearer token HTTP clients must send (default: $MP_ENGINE_MCP_TOKEN).")
def mcp(repo: str, branch: str, http: str | None, token: str | None) -> int:
    """Serve the orchestrator's side of the channel to an LLM client over MCP.

    Tools: send_mp, wait_result, get_status, list_results, get_run_file, approve, cancel, answer
    (docs/ORCHESTRATORS.md). Over stdio by default (Claude Desktop, Claude Code, the
    OpenAI Agents SDK); with --http, streamable HTTP at http://HOST:PORT/mcp behind a
    bearer token (ChatGPT's developer mode, through a tunnel). Without a token it serves
    only on a loopback address, with a token it prints. Runs anywhere that can reach
    the repository; every tool call is logged on stderr.

    \b
    Example:
      mp-engine mcp --repo git@github.com:me/mp-channel.git
      MP_ENGINE_MCP_TOKEN=... mp-engine mcp --repo git@github.com:me/mp-channel.git --http 127.0.0.1:8765
    """
    from mp_engine.commands.mcp import serve  # lazy: the MCP SDK only for this command

    return serve(repo, branch, http, token, _err)
