"""What every console answer carries: a strict content security policy and no caching of pages.

The policy allows only this server's own script, stylesheet and images (no inline script or
style, no other origin, no frames, forms only to this server), so even text that slipped through
escaping could not run; `Referrer-Policy: no-referrer` keeps a `?token=` URL out of any Referer.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import HTMLResponse, Response

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
NO_STORE = {"Cache-Control": "no-store"}


def html_page(body: str, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return HTMLResponse(body, status_code=status, headers={**SECURITY_HEADERS, **NO_STORE, **(headers or {})})


def json_answer(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, separators=(",", ":")), status_code=status,
                    media_type="application/json", headers={**SECURITY_HEADERS, **NO_STORE})
