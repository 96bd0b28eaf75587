"""What the REST backends share: endpoints, credentials, clients, retries and error translation.

This module and the backends are the only aiptrain code that imports googleapiclient, and only
when a REST backend is chosen. Clients are built from the discovery documents that ship with
google-api-python-client (no discovery request), against a configurable endpoint.

Credentials:
- `AIPTRAIN_API_TOKEN` set: that bearer token (for an emulator started with `--token`);
- a loopback endpoint (127.0.0.0/8, localhost, [::1]): the token of the `aiptrain local serve`
  on that port, from its file under AIPTRAIN_HOME (`paths.serve_token_path`, re-read after a
  401: see `local_token`), when there is one;
  else anonymous (a server started with `--no-auth`); no Google credentials are looked up;
- anything else: Application Default Credentials with the cloud-platform scope.

Tokens never reach a log record or an error message: requests are logged at DEBUG with the
`Authorization` header redacted, and anything that looks like a token in a URL is masked too.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from aiptrain._backends.base import RequestOptions
from aiptrain._backends.polling import current_retry_deadline
from aiptrain._loopback import is_loopback_url
from aiptrain.errors import (
    AiptrainError,
    AlreadyExists,
    EndpointUnreachable,
    JobAlreadyFinished,
    NotFound,
    OperationalError,
    PermissionDenied,
    Problem,
    TransientError,
    UsageError,
    ValidationFailed,
)

LOG = logging.getLogger("aiptrain.rest")

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
ENDPOINT_ENV = "AIPTRAIN_API_ENDPOINT"
LOGGING_ENDPOINT_ENV = "AIPTRAIN_LOGGING_ENDPOINT"
TOKEN_ENV = "AIPTRAIN_API_TOKEN"  # noqa: S105 (the name of the variable, not a secret)
DEFAULT_LOGGING_ENDPOINT = "https://logging.googleapis.com/"
HTTP_TIMEOUT_SECONDS = 60.0
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})

_REDACTED = "<redacted>"
# Query parameters that can carry a credential in a URL.
_SECRET_QUERY = re.compile(r"(?i)\b(access_token|oauth_token|key|token)=[^&\s]+")
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+")


class ServiceUnavailable(TransientError):
    """The service is overloaded or down (HTTP 429/5xx, connection refused); trying later may work."""

    retryable = True


def redact(text: str) -> str:
    """`text` with bearer tokens and credential query parameters masked."""
    text = _BEARER.sub(f"Bearer {_REDACTED}", text)
    return _SECRET_QUERY.sub(lambda m: f"{m.group(1)}={_REDACTED}", text)


# -- endpoints and credentials ----------------------------------------------------------------


def resolve_endpoint(explicit: str | None, default: str) -> str:
    """The endpoint to talk to: the explicit setting, else $AIPTRAIN_API_ENDPOINT, else `default`."""
    endpoint = explicit or os.environ.get(ENDPOINT_ENV) or default
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{endpoint!r} is not an http(s) endpoint URL",
                         hint="write it as https://HOST/ or http://127.0.0.1:PORT/")
    return endpoint if endpoint.endswith("/") else endpoint + "/"


def is_overridden(explicit: str | None) -> bool:
    return bool(explicit or os.environ.get(ENDPOINT_ENV))


def uses_google_credentials(endpoint: str) -> bool:
    """Whether requests to `endpoint` carry Application Default Credentials (not a given token)."""
    return not os.environ.get(TOKEN_ENV) and not is_loopback_url(endpoint)


def _credentials_for(endpoint: str) -> tuple[Any, bool]:
    """(credentials, refreshable) for `endpoint`."""
    token = os.environ.get(TOKEN_ENV)
    if token:
        from google.oauth2.credentials import Credentials

        return Credentials(token=token), False  # type: ignore[no-untyped-call]
    if is_loopback_url(endpoint):
        local = _local_serve_credentials(endpoint)
        if local is not None:
            return local, True  # a 401 re-reads the file: the server may have restarted
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials(), False  # type: ignore[no-untyped-call]
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _project = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
    except DefaultCredentialsError as error:
        raise OperationalError(
            f"no Google credentials to call {endpoint}: {redact(str(error))}",
            hint="run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS "
            "to a service account key file",
        ) from None
    return credentials, True


def _local_serve_credentials(endpoint: str) -> Any | None:
    """The token `aiptrain local serve` wrote for the loopback port of `endpoint`, if any."""
    from aiptrain._backends.mlv1.local_token import LocalServeToken, read_token
    from aiptrain._paths import serve_token_path

    parts = urlsplit(endpoint)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    path = serve_token_path(port)
    token = read_token(path)
    return LocalServeToken(path, token) if token else None


def _logging_http(timeout: float, endpoint: str, options: RequestOptions | None = None) -> Any:
    """An httplib2.Http that logs each request at DEBUG, with credentials redacted, and adds
    what gcloud's --billing-project and --trace-token ask for."""
    import httplib2

    sent = options or RequestOptions()

    class LoggingHttp(httplib2.Http):  # type: ignore[misc]
        def request(self, uri: str, method: str = "GET", body: Any = None, headers: Any = None,
                    *args: Any, **kwargs: Any) -> Any:
            uri, headers = with_request_options(uri, dict(headers or {}), sent)
            started = time.monotonic()
            if LOG.isEnabledFor(logging.DEBUG):
                shown = {k: (_REDACTED if k.lower() in ("authorization", "x-goog-api-key") else v)
                         for k, v in (headers or {}).items()}
                LOG.debug("-> %s %s headers=%s", method, redact(uri), shown)
            response, content = super().request(uri, method, body, headers, *args, **kwargs)
            LOG.debug("<- %s %s %s (%.0f ms)", response.status, method, redact(uri),
                      (time.monotonic() - started) * 1000)
            return response, content

    return LoggingHttp(timeout=timeout, proxy_info=_proxy_for(endpoint))


def with_request_options(uri: str, headers: dict[str, str],
                         options: RequestOptions) -> tuple[str, dict[str, str]]:
    """The request's URI and headers with the billing project and the trace token, as gcloud sends them."""
    if options.billing_project:
        headers["X-Goog-User-Project"] = options.billing_project
    if options.trace_token:
        separator = "&" if "?" in uri else "?"
        uri = f"{uri}{separator}{urlencode({'trace': 'token:' + options.trace_token})}"
    return uri, headers


def _impersonated(credentials: Any, service_account: str) -> Any:
    """`credentials` acting as `service_account` (IAM Credentials API), as gcloud's
    --impersonate-service-account does; the caller needs the Token Creator role on it."""
    from google.auth import impersonated_credentials

    return impersonated_credentials.Credentials(  # type: ignore[no-untyped-call]
        source_credentials=credentials, target_principal=service_account, target_scopes=[CLOUD_PLATFORM_SCOPE])


def _proxy_for(endpoint: str) -> Any:
    """The HTTPS_PROXY/HTTP_PROXY to reach `endpoint` through, or None.

    None for a loopback endpoint (an emulator on this machine is never behind a proxy) and for a
    host that NO_PROXY exempts: httplib2 refuses every request of a client given a proxy
    without PySocks, even to an exempt host, so the client gets none.
    """
    import httplib2

    parts = urlsplit(endpoint)
    if is_loopback_url(endpoint):
        return None
    info = httplib2.proxy_info_from_environment(parts.scheme or "https")
    if info is None or not info.applies_to(parts.hostname or ""):
        return None
    return info


def build_client(api: str, version: str, endpoint: str, options: RequestOptions | None = None) -> Any:
    """A googleapiclient resource for `api` `version` at `endpoint`, built offline.

    `options`: gcloud's global flags for the requests; impersonation applies to Google
    credentials only (an emulator's token is not a Google identity)."""
    from google_auth_httplib2 import AuthorizedHttp
    from googleapiclient import discovery

    credentials, refreshable = _credentials_for(endpoint)
    if options is not None and options.impersonate_service_account and uses_google_credentials(endpoint):
        credentials = _impersonated(credentials, options.impersonate_service_account)
    http = AuthorizedHttp(
        credentials,
        http=_logging_http(HTTP_TIMEOUT_SECONDS, endpoint, options),
        # Static and anonymous credentials cannot be refreshed: a 401 is an answer, not a cue.
        refresh_status_codes=(401,) if refreshable else (),
    )
    return discovery.build(
        api,
        version,
        http=http,
        static_discovery=True,
        cache_discovery=False,
        client_options={"api_endpoint": endpoint},
    )


# -- calls, retries and errors ----------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential back-off with full jitter for idempotent calls; Retry-After wins when given."""

    attempts: int = 5
    base: float = 0.5
    ceiling: float = 16.0
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        return rng.uniform(0, min(self.ceiling, self.base * 2**attempt))


DEFAULT_RETRY = RetryPolicy()


def call(request: Any, *, what: str, retry: bool, policy: RetryPolicy = DEFAULT_RETRY,
         sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> Any:
    """Execute a googleapiclient request; translate failures into aiptrain errors.

    With `retry` (reads and other idempotent calls), 429, 5xx and connection failures are retried
    with back-off, honouring Retry-After, but never past a `retry_deadline`. Creates are never
    retried: the first attempt may have reached the server.
    """
    from googleapiclient.errors import HttpError

    rng = rng or random.Random()
    attempt = 0
    while True:
        try:
            return request.execute(num_retries=0)
        except HttpError as error:
            translated = translate_http_error(error, what=what)
        except (OSError, _httplib2_error()) as error:
            reason = redact(str(error)) or type(error).__name__
            translated = EndpointUnreachable(
                f"{what}: cannot reach {redact(_request_host(request))}: {reason}",
                hint="check the endpoint and your network connection",
            )
        if not (retry and isinstance(translated, TransientError)) or attempt + 1 >= policy.attempts:
            raise translated
        delay = policy.delay(attempt, translated.retry_after, rng)
        deadline = current_retry_deadline()
        if deadline is not None and time.monotonic() + delay > deadline:
            raise translated
        LOG.debug("%s; retrying in %.1f s", translated.message, delay)
        sleep(delay)
        attempt += 1


def _httplib2_error() -> type[Exception]:
    import httplib2

    error: type[Exception] = httplib2.HttpLib2Error
    return error


def _request_host(request: Any) -> str:
    uri = str(getattr(request, "uri", ""))
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else uri


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A Retry-After header (delta-seconds or HTTP-date) in seconds, or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _error_payload(content: bytes) -> dict[str, Any]:
    try:
        data = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    if isinstance(data, list) and data:
        data = data[0]
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) else {}


def field_violations(error_payload: dict[str, Any]) -> list[Problem]:
    """google.rpc.BadRequest field violations of a Google error payload, as Problems."""
    problems: list[Problem] = []
    for detail in error_payload.get("details") or []:
        if not isinstance(detail, dict) or not str(detail.get("@type", "")).endswith("google.rpc.BadRequest"):
            continue
        for violation in detail.get("fieldViolations") or []:
            problems.append(Problem(str(violation.get("field", "")), str(violation.get("description", ""))))
    return problems


def translate_http_error(error: Any, *, what: str) -> AiptrainError:
    """An aiptrain error for a googleapiclient HttpError (never carrying request headers)."""
    status = int(error.resp.status)
    payload = _error_payload(error.content if isinstance(error.content, bytes) else b"")
    code_name = str(payload.get("status") or error.resp.reason or status)
    message = redact(str(payload.get("message") or error.resp.reason or f"HTTP {status}").strip())
    text = f"{what}: {code_name}: {message}"
    if status == 404:
        return NotFound(text)
    if status == 409:
        return AlreadyExists(text)
    if status == 401:
        return PermissionDenied(text, hint="the credentials were refused: run `gcloud auth "
                                "application-default login`, or set AIPTRAIN_API_TOKEN for an emulator "
                                "started with --token")
    if status == 403:
        return PermissionDenied(text, hint="check that the API is enabled and that your account has the "
                                "needed role in this project")
    if status == 400 and code_name == "FAILED_PRECONDITION":
        # The resource is in the wrong state: not bad input, and the local engine says the same with
        # exit 1. A cancel is refused so only for a job that already ended (ml v1 and Vertex AI alike).
        if what.endswith(".cancel"):
            return JobAlreadyFinished(text)
        return OperationalError(text)
    if status == 400:
        problems = field_violations(payload)
        if problems:
            failed = ValidationFailed(problems)
            failed.message = f"{what}: the server refused the request: {message}"
            return failed
        return UsageError(text)
    if status in RETRYABLE_STATUS:
        return ServiceUnavailable(text, retry_after=retry_after_seconds(error.resp.get("retry-after")),
                                  hint="the service is busy or unavailable; try again later")
    return OperationalError(text)
