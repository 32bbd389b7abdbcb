"""`mp-engine mcp`'s start: what it refuses before serving, each with the fix."""

from __future__ import annotations

from mp_engine.client.mcp.start import Exposure, _passphrase, serve
from mp_engine.core.exitcodes import ExitCode


def test_a_passphrase_file_must_be_private_and_long_enough(tmp_path, monkeypatch):
    said: list[str] = []
    monkeypatch.delenv("MP_ENGINE_MCP_PASSPHRASE", raising=False)
    assert _passphrase(None, said.append) is None  # OAuth off
    f = tmp_path / "pass"
    f.write_text("a long enough passphrase\n")
    f.chmod(0o644)
    assert _passphrase(f, said.append) is False and "chmod 600" in said[-1]
    f.chmod(0o600)
    assert _passphrase(f, said.append) == "a long enough passphrase"
    f.write_text("short")
    assert _passphrase(f, said.append) is False and "at least 12" in said[-1]
    assert _passphrase(tmp_path / "missing", said.append) is False and "cannot read" in said[-1]
    monkeypatch.setenv("MP_ENGINE_MCP_PASSPHRASE", "from the environment")
    assert _passphrase(None, said.append) == "from the environment"


def test_bad_addresses_and_urls_are_refused_before_serving(tmp_path, monkeypatch):
    said: list[str] = []
    monkeypatch.delenv("MP_ENGINE_MCP_TOKEN", raising=False)
    monkeypatch.delenv("MP_ENGINE_MCP_PASSPHRASE", raising=False)
    store = tmp_path / "s.db"
    assert serve("r", "main", "nowhere", said.append, store=store) == ExitCode.USAGE
    assert "HOST:PORT" in said[-1]
    assert (
        serve("r", "main", "127.0.0.1:1", said.append, exposure=Exposure("https://x.org/p"), store=store)
        == ExitCode.USAGE
    )
    assert "has a path" in said[-1]
    assert serve("r", "main", "0.0.0.0:1", said.append, store=store) == ExitCode.USAGE
    assert "without a token or OAuth" in said[-1] and "MP_ENGINE_MCP_PASSPHRASE" in said[-1]


def test_a_trusted_proxy_and_a_limit_must_parse(tmp_path, monkeypatch):
    said: list[str] = []
    monkeypatch.setenv("MP_ENGINE_MCP_TOKEN", "t" * 20)
    store = tmp_path / "s.db"
    bad_proxy = Exposure(trusted_proxies=("the tunnel",))
    assert serve("r", "main", "127.0.0.1:1", said.append, exposure=bad_proxy, store=store) == ExitCode.USAGE
    assert "is not an IP address or network" in said[-1]
    bad_limit = Exposure(limits=("backoff_s=soon",))
    assert serve("r", "main", "127.0.0.1:1", said.append, exposure=bad_limit, store=store) == ExitCode.USAGE
    assert "is not a number" in said[-1]
