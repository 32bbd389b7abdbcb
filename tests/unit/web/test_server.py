"""Serving: a real uvicorn on loopback in a thread, the token rule off loopback, a port
in use, and how the URL is told (never with the token)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.errors import ConfigError
from mp_engine.web.server import Served, check_address, opening


def test_served_on_loopback_in_a_thread_and_closed(ws):
    served = Served(ws, load_config(ws.root), "127.0.0.1", 0, None).start()
    try:
        with urllib.request.urlopen(f"{served.url}api/v1/state", timeout=10) as r:
            assert json.loads(r.read())["state"]["status"] in ("ONLINE", "OFFLINE")
        assert opening(served, "X") == served.url and served.port > 0
    finally:
        served.close()
    assert not served.thread.is_alive()


def test_off_loopback_a_token_is_required_and_never_printed(ws):
    with pytest.raises(ConfigError, match=r"not loopback, without a token.*\$MP_ENGINE_DASHBOARD_TOKEN"):
        check_address("0.0.0.0", None, "MP_ENGINE_DASHBOARD_TOKEN")
    check_address("127.0.0.1", None, "T")
    served = Served(ws, load_config(ws.root), "0.0.0.0", 0, "tok-123456789")
    try:
        told = opening(served, "MP_ENGINE_DASHBOARD_TOKEN")
        assert "tok-123456789" not in told and "?token=... (the value of $MP_ENGINE_DASHBOARD_TOKEN" in told
    finally:
        served.close()


def test_a_port_in_use_is_a_config_error_with_the_fix(ws):
    first = Served(ws, load_config(ws.root), "127.0.0.1", 0, None)
    try:
        with pytest.raises(ConfigError, match="pick a free port"):
            Served(ws, load_config(ws.root), "127.0.0.1", first.port, None)
    finally:
        first.close()
