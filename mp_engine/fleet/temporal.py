"""The connection to Temporal, as `[fleet]` describes it: the address and namespace, TLS
or mTLS, a Temporal Cloud API key, and an optional codec that encrypts every payload
(prompts, the MP's text and outputs travel in them). One place for the engine, the
worker, `status` and `doctor`; also the question "who polls this queue?".
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, TLSConfig
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from mp_engine.config.fleet import FleetConfig
from mp_engine.core.errors import ConfigError, FleetUnreachable

ENCRYPTED = b"binary/encrypted"
LIVE_POLLER = 90.0  # seconds: a worker long-polls for up to ~70 s, so one seen since is live


def fix_for(cfg: FleetConfig) -> str:
    return (
        f"Start Temporal at {cfg.temporal} (on one box: `temporal server start-dev --db-filename fleet.db`, "
        "docs/FLEET.md) or correct `[fleet] temporal` in mp-engine.toml, then start again."
    )


class AesGcmCodec(PayloadCodec):
    """Every payload sealed with AES-256-GCM under `[fleet] payload_key_env`'s key; the
    server (and its UI) see only ciphertext. Engine and workers need the same key."""

    def __init__(self, key: bytes):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.aead = AESGCM(key)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            nonce = os.urandom(12)
            sealed = nonce + self.aead.encrypt(nonce, p.SerializeToString(), None)
            out.append(Payload(metadata={"encoding": ENCRYPTED}, data=sealed))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding", b"") != ENCRYPTED:
                out.append(p)
                continue
            plain = self.aead.decrypt(p.data[:12], p.data[12:], None)
            out.append(Payload.FromString(plain))
        return out


def _env(name: str, environ: Mapping[str, str], what: str) -> str:
    value = environ.get(name, "")
    if not value:
        raise ConfigError(f"[fleet] {what} names ${name}, which is not set. Set it in the service's environment.")
    return value


def converter(cfg: FleetConfig, environ: Mapping[str, str]) -> DataConverter:
    if not cfg.payload_key_env:
        return DataConverter.default
    raw = _env(cfg.payload_key_env, environ, "payload_key_env")
    try:
        key = base64.b64decode(raw, validate=True)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ConfigError(
            f"${cfg.payload_key_env} must hold 32 bytes in base64 (an AES-256 key). "
            "Make one with `python3 -c 'import os,base64; print(base64.b64encode(os.urandom(32)).decode())'`."
        )
    return DataConverter(payload_codec=AesGcmCodec(key))


def tls(cfg: FleetConfig) -> TLSConfig | bool:
    if not (cfg.tls or cfg.tls_ca or cfg.tls_cert or cfg.api_key_env):
        return False
    read = lambda p: Path(p).expanduser().read_bytes() if p else None  # noqa: E731
    try:
        return TLSConfig(
            server_root_ca_cert=read(cfg.tls_ca),
            client_cert=read(cfg.tls_cert),
            client_private_key=read(cfg.tls_key),
            domain=cfg.tls_server_name or None,
        )
    except OSError as e:
        raise ConfigError(f"[fleet] TLS file unreadable: {e}. Correct tls_ca / tls_cert / tls_key.") from e


async def connect(
    cfg: FleetConfig, environ: Mapping[str, str], *, identity: str | None = None, runtime: Runtime | None = None
) -> Client:
    """A client of `[fleet] temporal`; FleetUnreachable (exit 2) when it does not answer
    within `connect_timeout`."""
    api_key = _env(cfg.api_key_env, environ, "api_key_env") if cfg.api_key_env else None
    try:
        return await asyncio.wait_for(
            Client.connect(
                cfg.temporal,
                namespace=cfg.namespace,
                api_key=api_key,
                tls=tls(cfg),
                data_converter=converter(cfg, environ),
                identity=identity,
                runtime=runtime,
            ),
            cfg.connect_timeout,
        )
    except (RuntimeError, OSError, TimeoutError) as e:
        why = "no answer" if isinstance(e, TimeoutError) else str(e).splitlines()[0]
        raise FleetUnreachable(f"Temporal at {cfg.temporal} is unreachable ({why}). Fix: {fix_for(cfg)}") from e


@dataclass(frozen=True)
class Poller:
    identity: str
    seen: float  # seconds since it last polled


async def pollers(client: Client, queue: str) -> list[Poller]:
    """The workers polling `queue` for attempts (seen in the last LIVE_POLLER seconds)."""
    resp = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    now = time.time()
    out = []
    for p in resp.pollers:
        seen = now - p.last_access_time.ToMilliseconds() / 1000 if p.HasField("last_access_time") else 0.0
        if seen <= LIVE_POLLER:
            out.append(Poller(p.identity, max(0.0, seen)))
    return sorted(out, key=lambda p: p.identity)


def queues(cfg: FleetConfig) -> list[str]:
    """Every queue the engine may send to."""
    return sorted({cfg.task_queue, *cfg.queues.values()})


def survey(cfg: FleetConfig, environ: Mapping[str, str]) -> dict[str, object]:
    """For `status` and `doctor`: whether Temporal answers, and who polls each queue the
    engine sends to ({queue: [worker identities]}), or the error."""
    quick = cfg.model_copy(update={"connect_timeout": min(cfg.connect_timeout, 5.0)})

    async def look() -> dict[str, list[str]]:
        client = await connect(quick, environ)
        return {q: [p.identity for p in await pollers(client, q)] for q in queues(cfg)}

    out: dict[str, object] = {"temporal": cfg.temporal, "namespace": cfg.namespace}
    try:
        out["queues"] = asyncio.run(look())
    except ConfigError as e:  # FleetUnreachable, or a key or TLS file missing
        out["error"] = str(e)
    except RPCError as e:
        out["error"] = f"Temporal at {cfg.temporal} refused: {e}"
    return out
