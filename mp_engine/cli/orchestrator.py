"""The orchestrator's side of the command line: `send` and `mcp`, which run anywhere that
can reach the channel repository, not on the engine host. cli/main.py adds them to its
group; the bodies are client/send.py and client/mcp/, imported when they run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.terminal import say_error as _err


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
@click.option("--rerun", is_flag=True, help="Send an MP whose exact bytes already ran, to run it again.")
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
    from mp_engine.client.send import send_mp  # lazy: see the module docstring
    from mp_engine.client.send_request import send_answer, send_cancel

    if (file is None) == (cancel_id is None) or (answer_id and (cancel_id or file is None)):
        raise click.UsageError("give FILE to send an MP, --cancel MP-ID to cancel one, or --answer MP-ID FILE")
    force, rerun = opts.pop("force"), opts.pop("rerun")  # the rest: branch, wait, timeout, poll
    if answer_id is not None:
        assert file is not None
        text = file.read_text(encoding="utf-8")
        return send_answer(answer_id, text, repo, **opts, echo=click.echo, err=_err)
    if cancel_id is not None:
        return send_cancel(cancel_id, repo, **opts, echo=click.echo, err=_err)
    assert file is not None
    return send_mp(file, repo, force=force, rerun=rerun, **opts, echo=click.echo, err=_err)


store_option = click.option(
    "--store",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="MP_ENGINE_MCP_STORE",
    help="The OAuth clients and tokens (SQLite, mode 0600). [default: ~/.local/state/mp-engine/mcp.sqlite3]",
)


def _mcp_extra() -> bool:
    """Whether the MCP SDK is installed; if not, say how to install it."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        _err("mp-engine mcp: the MCP SDK is not installed: pip install 'mp-engine[mcp]'")
        return False
    return True


def _store(path: Path | None) -> Path:
    from mp_engine.client.mcp.store import default_path

    return path or default_path()


@click.group(invoke_without_command=True)
@click.option("--repo", metavar="URL_OR_PATH", help="The engine's git remote (as for `send`). Required to serve.")
@click.option("--branch", default="main", show_default=True, help="Branch that carries MPs and results.")
@click.option("--http", metavar="HOST:PORT", help="Serve streamable HTTP here instead of stdio (127.0.0.1:8765).")
@click.option(
    "--token",
    metavar="TOKEN",
    help="Static bearer token for HTTP clients. Shows in `ps` to every user of the host: prefer "
    "$MP_ENGINE_MCP_TOKEN or --token-file.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file (mode 0600) holding the static bearer token.",
)
@click.option(
    "--public-url",
    metavar="URL",
    help="The https URL clients reach (a tunnel's); every URL the server hands out uses it "
    "(default: $MP_ENGINE_MCP_PUBLIC_URL, else the bound address).",
)
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="HOST", help="Another Host value to answer to.")
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    metavar="ADDRESS",
    help="The address (or network) the tunnel connects from; only its X-Forwarded-For names the client's "
    "address. Off by default ($MP_ENGINE_MCP_TRUSTED_PROXY).",
)
@click.option(
    "--limit",
    "limits",
    multiple=True,
    metavar="NAME=VALUE",
    help="Change one of the limits (docs/ORCHESTRATORS.md; $MP_ENGINE_MCP_LIMITS holds pairs too).",
)
@click.option(
    "--owner-passphrase-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Turns OAuth on: the passphrase the owner enters on the consent page (or $MP_ENGINE_MCP_PASSPHRASE).",
)
@click.option("--access-token-ttl", type=click.IntRange(1), default=3600, show_default=True, help="Seconds.")
@store_option
@click.pass_context
def mcp(ctx: click.Context, repo: str | None, http: str | None, **opts: Any) -> int:
    """Serve the orchestrator's side of the channel to an LLM client over MCP.

    Tools: send_mp, wait_result, get_status, list_results, get_run_file, approve, cancel, answer
    (docs/ORCHESTRATORS.md). Over stdio by default (Claude Desktop, Claude Code, the
    OpenAI Agents SDK); with --http, streamable HTTP at /mcp (ChatGPT's developer mode,
    Claude.ai's connectors, through a tunnel and --public-url) behind a static token
    and, with an owner passphrase, OAuth 2.1; the same operations for a Custom GPT's
    Action at /api/v1 (/openapi.json). Without a token or passphrase it serves only on a
    loopback address, with a token it prints. Every call and every refused request is
    logged on stderr.

    \b
    Examples:
      mp-engine mcp --repo git@github.com:me/mp-channel.git
      MP_ENGINE_MCP_PASSPHRASE=... mp-engine mcp --repo git@github.com:me/mp-channel.git \\
          --http 127.0.0.1:8765 --public-url https://mp.example.org --trusted-proxy 127.0.0.1
      mp-engine mcp clients                     # the OAuth clients; `mcp revoke ID` removes one
      mp-engine mcp approve-login               # sign-ins waiting; approve one from the host
    """
    if ctx.invoked_subcommand is not None:
        ctx.obj = {"store": _store(opts["store"]), "limits": opts["limits"]}
        return ExitCode.OK
    if not repo:
        raise click.UsageError("--repo is required to serve (or give a subcommand: clients, revoke, approve-login)")
    if not _mcp_extra():
        return ExitCode.USAGE
    from mp_engine.client.mcp.start import Exposure, Secrets, serve  # lazy: the MCP SDK only for this command

    if ctx.get_parameter_source("token") == click.core.ParameterSource.COMMANDLINE:
        _err(
            "mp-engine mcp: warning: --token shows in `ps` to every user of this host; prefer $MP_ENGINE_MCP_TOKEN or --token-file"
        )
    return serve(
        repo,
        opts["branch"],
        http,
        _err,
        secrets_from=Secrets(opts["token"], opts["token_file"], opts["owner_passphrase_file"]),
        exposure=Exposure(opts["public_url"], opts["allowed_hosts"], opts["trusted_proxies"], opts["limits"]),
        store=_store(opts["store"]),
        access_ttl=opts["access_token_ttl"],
    )


@mcp.group("clients", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print them as JSON.")
@click.pass_context
def mcp_clients(ctx: click.Context, as_json: bool) -> int:
    """List the OAuth clients: id, name, scopes, when added, when last used, and when one
    that the owner never allowed is forgotten."""
    if ctx.invoked_subcommand is not None or not _mcp_extra():
        return ExitCode.OK if ctx.invoked_subcommand else ExitCode.USAGE
    from mp_engine.client.mcp.clients import list_clients

    return list_clients(ctx.obj["store"], ctx.obj["limits"], as_json, click.echo)


@mcp_clients.command("add")
@click.option("--name", required=True, help="What the consent page calls it (for example: My Custom GPT).")
@click.option(
    "--redirect-uri",
    required=True,
    metavar="URI",
    help="The callback URL the client gives: https, http on loopback, or a native app's own scheme.",
)
@click.option("--scope", default="mp:read mp:write", show_default=True, help="Scopes it may ask for.")
@click.option(
    "--auth-method",
    type=click.Choice(["client_secret_post", "client_secret_basic"]),
    default="client_secret_post",
    show_default=True,
)
@click.pass_obj
def mcp_clients_add(obj: dict[str, Any], name: str, redirect_uri: str, scope: str, auth_method: str) -> int:
    """Register a confidential client by hand (a Custom GPT's Action OAuth); print its id and secret."""
    if not _mcp_extra():
        return ExitCode.USAGE
    from mp_engine.client.mcp.clients import add_client

    return add_client(obj["store"], name, redirect_uri, scope, auth_method, click.echo, _err)


@mcp.command("revoke")
@click.argument("client_id")
@click.pass_obj
def mcp_revoke(obj: dict[str, Any], client_id: str) -> int:
    """Remove an OAuth client and every token it holds."""
    if not _mcp_extra():
        return ExitCode.USAGE
    from mp_engine.client.mcp.clients import revoke

    return revoke(obj["store"], client_id, click.echo, _err)


@mcp.command("approve-login")
@click.argument("request", required=False, metavar="REQUEST")
@click.option("--read-only", is_flag=True, help="Grant mp:read only, whatever the client asked for.")
@click.pass_obj
def mcp_approve_login(obj: dict[str, Any], request: str | None, read_only: bool) -> int:
    """Approve a sign-in waiting on the consent page, from the host, without the passphrase.

    Without REQUEST, lists the sign-ins waiting (the lockout page shows the one to give).
    With it, approves that one: the browser that opened it moves on to the client by
    itself. Passes every lockout; only whoever can read the server's store can do it.

    \b
    Example:
      mp-engine mcp approve-login k3J9xQ2vLm
    """
    if not _mcp_extra():
        return ExitCode.USAGE
    from mp_engine.client.mcp.clients import approve_login

    return approve_login(obj["store"], request, read_only, click.echo, _err)


COMMANDS = (send, mcp)
