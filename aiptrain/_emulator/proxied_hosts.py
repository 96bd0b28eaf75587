"""What the emulator answers on its proxied port, where requests name Google's hosts (`proxy`).

Requests that reach the emulator through its proxy carry Google's host names as `Host`. On that
port only (`RequestGuard` takes those names there and nowhere else), this layer:

- answers `oauth2.googleapis.com/token` itself: a client refreshing the credentials file
  `local serve` wrote (`tokens.write_credentials_file`) gets the server's token back, and any
  other refresh is refused as Google refuses it (400 invalid_grant);
- answers Cloud Resource Manager's `projects.get` (v1 and v3) behind the guard, with the project
  number the emulator already gives the project (what the Vertex AI SDK and Airflow ask);
- keeps each host to its own API: ml v1's paths on `ml.googleapis.com`, Vertex AI's on
  `aiplatform.googleapis.com`, `entries:list` on `logging.googleapis.com`; anything else is a 404
  naming what is served there.

Everything else goes on to the app as it is, behind the same guard as the server's own port.
"""

from __future__ import annotations

import hmac
import json
import re
from typing import Any
from urllib.parse import parse_qs

from aiptrain._emulator.errors import ApiError
from aiptrain._emulator.google_hosts import OAUTH2_HOST, RESOURCE_MANAGER_HOST, api_of
from aiptrain._emulator.guard import ASGIApp, Receive, RequestGuard, Scope, Send, send_error, split_host_header
from aiptrain._emulator.projects import ProjectDirectory
from aiptrain._emulator.tokens import credential_token

_TOKEN_LIFETIME_SECONDS = 3599
_MAX_FORM_BYTES = 64 * 1024
# Each API's paths on its own host; the emulator's console and the other APIs are not there.
_API_PATHS = {
    "ml": re.compile(r"/v1/projects/[^/]+/jobs(?:[/:].*)?"),
    "aiplatform": re.compile(r"/v1/projects/[^/]+/locations/.+"),
    "logging": re.compile(r"/v2/entries:list"),
    "cloudresourcemanager": re.compile(r"/v[13]/projects/[^/:]+"),
}


class ProxiedHosts:
    """ASGI middleware in front of the guarded app; requests on other ports pass through untouched."""

    def __init__(self, app: ASGIApp, *, proxied_port: int, token: str | None, refresh_token: str,
                 projects: ProjectDirectory, bind_host: str) -> None:
        self.app = app
        self.proxied_port = proxied_port
        self.token = token
        self.refresh_token = refresh_token
        self.projects = projects
        self.resource_manager = RequestGuard(self._project, token=token, bind_host=bind_host,
                                             proxied_port=proxied_port)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server")
        if scope["type"] != "http" or not server or server[1] != self.proxied_port:
            await self.app(scope, receive, send)
            return
        host = split_host_header(_header(scope, "host")).lower().rstrip(".")
        path = str(scope.get("path", ""))
        if host == OAUTH2_HOST:
            await self._token(scope, receive, send)
            return
        api = api_of(host)
        pattern = _API_PATHS.get(api)
        if pattern is not None and not pattern.fullmatch(path):
            await send_error(send, ApiError("NOT_FOUND", f"The aiptrain emulator does not serve {path[:200]} on "
                                            f"{host}: it answers {api}'s job, location and log paths there only."))
            return
        if host == RESOURCE_MANAGER_HOST:
            await self.resource_manager(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _project(self, scope: Scope, receive: Receive, send: Send) -> None:
        """projects.get: the project as Cloud Resource Manager describes it, with its emulator number."""
        if scope["method"] != "GET":
            await send_error(send, ApiError("INVALID_ARGUMENT", "Only projects.get is served.", http_code=405))
            return
        version, project = str(scope["path"]).split("/")[1], str(scope["path"]).split("/")[3]
        project_id = self.projects.project_id(project)
        number = self.projects.number(project_id)
        if version == "v3":
            body: dict[str, Any] = {"name": f"projects/{number}", "projectId": project_id, "state": "ACTIVE",
                                    "displayName": project_id, "parent": ""}
        else:
            body = {"projectNumber": number, "projectId": project_id, "lifecycleState": "ACTIVE", "name": project_id}
        await _send_json(send, 200, body)

    async def _token(self, scope: Scope, receive: Receive, send: Send) -> None:
        """POST /token with grant_type=refresh_token: the server's token for the file's refresh token."""
        if scope["method"] != "POST" or scope.get("path") != "/token":
            await _send_json(send, 404, {"error": "not_found",
                                         "error_description": "Only POST /token (a refresh) is served here."})
            return
        form = parse_qs((await _read_body(receive)).decode("utf-8", "replace"))
        sent = (form.get("refresh_token") or [""])[0]
        if (form.get("grant_type") or [""])[0] != "refresh_token" or not hmac.compare_digest(
                sent.encode(), self.refresh_token.encode()):
            await _send_json(send, 400, {"error": "invalid_grant", "error_description":
                                         "aiptrain local serve refreshes only the credentials file it wrote "
                                         "(GOOGLE_APPLICATION_CREDENTIALS from `aiptrain local env`)."})
            return
        await _send_json(send, 200, {"access_token": credential_token(self.token), "token_type": "Bearer",
                                     "expires_in": _TOKEN_LIFETIME_SECONDS,
                                     "scope": "https://www.googleapis.com/auth/cloud-platform"})


def _header(scope: Scope, name: str) -> str:
    wanted = name.encode()
    for raw_name, raw_value in scope.get("headers", []):
        if raw_name.lower() == wanted:
            return str(raw_value.decode("latin-1"))
    return ""


async def _read_body(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if len(body) > _MAX_FORM_BYTES or not message.get("more_body"):
            return body[:_MAX_FORM_BYTES]


async def _send_json(send: Send, status: int, data: dict[str, Any]) -> None:
    body = json.dumps(data).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json; charset=UTF-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
