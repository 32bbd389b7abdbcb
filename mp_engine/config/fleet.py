"""`[fleet]`: agent tasks on workers through Temporal (docs/FLEET.md)."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from mp_engine.config.section import Section


class FleetConfig(Section):
    """`[fleet]`: agent tasks run on workers through Temporal (docs/FLEET.md). Off unless
    `temporal` is set; without it nothing imports `temporalio`."""

    temporal: str = Field("", description='the Temporal frontend, "host:port" (e.g. "127.0.0.1:7233")')
    namespace: str = Field("default", min_length=1)
    task_queue: str = Field("mp-engine", min_length=1, description="the queue workers poll (`worker --task-queue`)")
    queues: dict[str, str] = Field(
        {}, description="agent level name -> task queue, for levels only some workers have (a GPU host)"
    )
    work_remote: str = Field("", description="the git URL workers clone and push to (default: the [git] remote)")
    heartbeat_timeout: float = Field(
        120.0, ge=2, description="seconds without a worker's heartbeat before its attempt goes to another worker"
    )
    max_tries: int = Field(5, ge=1, description="runs of one attempt when workers are lost or fail (not the agent)")
    connect_timeout: float = Field(10.0, gt=0, description="seconds to wait for Temporal at start")
    tls: bool = Field(False, description="TLS to Temporal (implied by tls_ca, tls_cert or api_key_env)")
    tls_ca: str = Field("", description="PEM file of the CA that signed the server's certificate")
    tls_cert: str = Field("", description="PEM client certificate (mTLS)")
    tls_key: str = Field("", description="PEM key of tls_cert (mTLS)")
    tls_server_name: str = ""
    api_key_env: str = Field("", description="environment variable holding a Temporal Cloud API key")
    payload_key_env: str = Field(
        "", description="environment variable holding a base64 AES-256 key: payloads are encrypted (AES-GCM)"
    )

    @model_validator(mode="after")
    def _address(self) -> FleetConfig:
        if self.temporal and not re.fullmatch(r"\[?[\w.:-]+\]?:\d{1,5}", self.temporal):
            raise ValueError(f'temporal must be "host:port", got {self.temporal!r}')
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key go together (mTLS)")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.temporal)

    def queue_for(self, level_name: str) -> str:
        return self.queues.get(level_name, self.task_queue)
