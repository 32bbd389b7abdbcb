"""GitHub's REST API description, from a package registry, and requests checked against it.

The description is the one GitHub publishes (github/rest-api-description), as the npm
package `@octokit/openapi` ships it (`generated/api.github.com.json`, the octokit SDKs'
source). It is fetched once with `npm pack` into the test cache, beside the conformance
suite's CLIs (`$MP_ENGINE_CONFORMANCE_CACHE`, default `.cache/conformance/`), and only
that one file is kept. Where npm or the registry is not available the tests that need it
are skipped and say why, as the conformance tests are.

openapi-core checks each request and each answer against it; the description's own
validation (a minute for its 13 MB) is skipped: it is GitHub's, checked upstream.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest

PACKAGE, VERSION = "@octokit/openapi", "23.0.2"
MEMBER = "package/generated/api.github.com.json"
SERVER = "https://api.github.com"
REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    return Path(os.environ.get("MP_ENGINE_CONFORMANCE_CACHE") or REPO_ROOT / ".cache" / "conformance")


def description_file() -> Path:
    """`api.github.com.json` of the pinned package, fetched into the cache when missing."""
    target = cache_dir() / f"octokit-openapi-{VERSION}" / "api.github.com.json"
    if target.is_file():
        return target
    if shutil.which("npm") is None:
        pytest.skip(f"npm is not installed, so GitHub's OpenAPI description ({PACKAGE}) cannot be fetched")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmd = ["npm", "pack", f"{PACKAGE}@{VERSION}", "--pack-destination", tmp, "--silent"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            pytest.skip(f"could not fetch {PACKAGE}@{VERSION} (npm pack): {proc.stderr.strip()[-400:]}")
        tgz = Path(tmp) / proc.stdout.strip().splitlines()[-1]
        with tarfile.open(tgz) as tar:
            member = tar.extractfile(MEMBER)
            assert member is not None, f"{tgz} has no {MEMBER}"
            partial = Path(tmp) / "api.github.com.json"
            partial.write_bytes(member.read())
        os.replace(partial, target)
    return target


@functools.cache
def description() -> dict[str, Any]:
    return _nullable_enums(json.loads(description_file().read_text()))


def _nullable_enums(node: Any) -> Any:
    """A `nullable` schema with an `enum` takes null too, as GitHub means and sends (a check
    run's `conclusion` is null until it completes). JSON Schema, which openapi-core checks
    with, reads `enum` alone and refuses null; OpenAPI 3.0.3's clarification of `nullable`
    asks for null in the enum, which GitHub's description leaves out."""
    if isinstance(node, dict):
        if node.get("nullable") and isinstance(node.get("enum"), list) and None not in node["enum"]:
            node["enum"].append(None)
        for value in node.values():
            _nullable_enums(value)
    elif isinstance(node, list):
        for value in node:
            _nullable_enums(value)
    return node


@functools.cache
def openapi():
    from openapi_core import Config, OpenAPI

    return OpenAPI.from_dict(description(), config=Config(spec_validator_cls=None))


def resolve(node: Any) -> Any:
    """`node` with a top-level `$ref` followed (within the description)."""
    while isinstance(node, dict) and "$ref" in node:
        target: Any = description()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


@functools.cache
def operations() -> dict[str, tuple[str, str]]:
    """operationId -> (method, path template)."""
    return {
        op["operationId"]: (method, path)
        for path, item in description()["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and "operationId" in op
    }


def example(operation_id: str, status: int = 200) -> Any:
    """A fresh copy of the description's example answer of that operation."""
    method, path = operations()[operation_id]
    response = resolve(description()["paths"][path][method]["responses"][str(status)])
    examples = response["content"]["application/json"]["examples"]
    first = resolve(next(iter(examples.values())))
    return copy.deepcopy(first["value"])


class Request:
    """A request as openapi-core reads one (its `Request` protocol)."""

    def __init__(self, method: str, path: str, query, headers, body: bytes | None, content_type: str):
        from openapi_core.datatypes import RequestParameters
        from werkzeug.datastructures import Headers, ImmutableMultiDict

        self.host_url, self.path, self.method = SERVER, path, method.lower()
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(query), header=Headers(headers), cookie=ImmutableMultiDict(), path={}
        )
        self.body, self.content_type = body or None, content_type or "application/json"

    @property
    def full_url_pattern(self) -> str:
        return self.host_url + self.path


class Response:
    """An answer as openapi-core reads one."""

    def __init__(self, status: int, body: bytes, headers, content_type: str = "application/json"):
        from werkzeug.datastructures import Headers

        self.status_code, self.data, self.content_type = status, body, content_type
        self.headers = Headers(headers)


def problems(request: Request, response: Response | None = None) -> list[str]:
    """What in the request (and the answer, when given) GitHub's description does not allow."""
    found = []
    try:
        openapi().validate_request(request)
    except Exception as e:  # openapi-core's errors: the path, a parameter, the body
        found.append(f"request {request.method.upper()} {request.path}: {_why(e)}")
    if response is not None and not found:
        try:
            openapi().validate_response(request, response)
        except Exception as e:
            found.append(f"answer {response.status_code} to {request.method.upper()} {request.path}: {_why(e)}")
    return found


def _why(e: Exception) -> str:
    inner = [str(x) for x in getattr(e.__cause__, "schema_errors", ())] or [str(e.__cause__ or "")]
    return f"{e} {'; '.join(inner)[:600]}".strip()
