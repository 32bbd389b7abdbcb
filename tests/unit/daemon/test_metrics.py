"""[metrics] configuration: loopback only unless allowed, and a well-formed address."""

from __future__ import annotations

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.errors import ConfigError


@pytest.mark.parametrize("listen", ["127.0.0.1:9464", "localhost:9464", "[::1]:9464", "127.0.0.2:0"])
def test_loopback_addresses_are_accepted(tmp_path, listen):
    cfg = load_config(tmp_path, environ={"MP_ENGINE_METRICS__LISTEN": listen})
    assert cfg.metrics.address[1] == int(listen.rsplit(":", 1)[1])


def test_a_non_loopback_address_is_refused_unless_allowed(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ={"MP_ENGINE_METRICS__LISTEN": "0.0.0.0:9464"})
    assert "not a loopback address" in str(info.value) and "allow_remote = true" in str(info.value)
    cfg = load_config(
        tmp_path, environ={"MP_ENGINE_METRICS__LISTEN": "0.0.0.0:9464", "MP_ENGINE_METRICS__ALLOW_REMOTE": "true"}
    )
    assert cfg.metrics.address == ("0.0.0.0", 9464)


@pytest.mark.parametrize("listen", ["localhost", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000"])
def test_a_malformed_address_names_the_key(tmp_path, listen):
    with pytest.raises(ConfigError, match="listen must be HOST:PORT"):
        load_config(tmp_path, environ={"MP_ENGINE_METRICS__LISTEN": listen})


def test_metrics_are_off_by_default_and_prometheus_is_not_imported_by_the_cli():
    import subprocess
    import sys

    code = (
        "import sys; from mp_engine.cli.main import main; main(['--help']); print('prometheus_client' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip().endswith("False")
