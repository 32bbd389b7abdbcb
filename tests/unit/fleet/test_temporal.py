"""The connection to Temporal as `[fleet]` describes it (mp_engine/fleet/temporal.py):
the payload codec seals what travels, keys and TLS files are checked with a fix, and an
address that does not answer is FleetUnreachable (exit 2) with the fix."""

from __future__ import annotations

import asyncio
import base64
import os

import pytest
from temporalio.api.common.v1 import Payload

from mp_engine.config.fleet import FleetConfig
from mp_engine.core.errors import ConfigError, FleetUnreachable
from mp_engine.fleet.temporal import AesGcmCodec, connect, converter, survey, tls
from tests.fleetutil import free_port

KEY = base64.b64encode(os.urandom(32)).decode()


def test_payloads_are_sealed_and_only_the_same_key_opens_them():
    codec = AesGcmCodec(base64.b64decode(KEY))
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'{"prompt": "the secret plan"}')
    (sealed,) = asyncio.run(codec.encode([plain]))
    assert b"secret plan" not in sealed.SerializeToString() and sealed.metadata["encoding"] == b"binary/encrypted"
    assert asyncio.run(codec.decode([sealed])) == [plain]
    other = AesGcmCodec(os.urandom(32))
    with pytest.raises(Exception):  # noqa: B017 - cryptography's InvalidTag
        asyncio.run(other.decode([sealed]))
    assert asyncio.run(codec.decode([plain])) == [plain]  # an unsealed payload passes (an older engine's)


def test_the_payload_key_must_be_set_and_be_32_bytes():
    cfg = FleetConfig(temporal="127.0.0.1:7233", payload_key_env="FLEET_KEY")
    assert converter(cfg, {"FLEET_KEY": KEY}).payload_codec is not None
    with pytest.raises(ConfigError, match=r"\$FLEET_KEY, which is not set"):
        converter(cfg, {})
    with pytest.raises(ConfigError, match="32 bytes in base64"):
        converter(cfg, {"FLEET_KEY": base64.b64encode(b"short").decode()})
    assert converter(FleetConfig(temporal="h:1"), {}).payload_codec is None


def test_tls_is_off_by_default_and_reads_its_files(tmp_path):
    assert tls(FleetConfig(temporal="h:1")) is False
    (tmp_path / "ca.pem").write_bytes(b"CA")
    got = tls(FleetConfig(temporal="h:1", tls_ca=str(tmp_path / "ca.pem"), tls_server_name="t.example"))
    assert got.server_root_ca_cert == b"CA" and got.domain == "t.example"
    with pytest.raises(ConfigError, match="TLS file unreadable"):
        tls(FleetConfig(temporal="h:1", tls_cert=str(tmp_path / "no.pem"), tls_key=str(tmp_path / "no.key")))


def test_an_address_that_does_not_answer_is_unreachable_with_the_fix():
    cfg = FleetConfig(temporal=f"127.0.0.1:{free_port()}", connect_timeout=1)
    with pytest.raises(FleetUnreachable) as e:
        asyncio.run(connect(cfg, {}))
    assert f"Temporal at {cfg.temporal} is unreachable" in str(e.value) and "temporal server start-dev" in str(e.value)
    report = survey(cfg, {})
    assert report["temporal"] == cfg.temporal and "unreachable" in report["error"] and "queues" not in report


def test_the_fleet_section_checks_its_address_and_mtls_pair():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="host:port"):
        FleetConfig(temporal="localhost")
    with pytest.raises(ValidationError, match="go together"):
        FleetConfig(temporal="h:1", tls_cert="c.pem")
    cfg = FleetConfig(temporal="[::1]:7233", queues={"local-gpu": "gpu"})
    assert cfg.enabled and cfg.queue_for("local-gpu") == "gpu" and cfg.queue_for("claude") == "mp-engine"
    assert not FleetConfig().enabled
