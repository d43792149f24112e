"""The HTTP layer `recollect serve` puts in front of every LangGraph route (the generated config's `http.app`).

LangGraph's auth handlers (recollect.service.auth) guard its API routes only: its meta routes (`/info`,
`/metrics`, `/docs`, `/openapi.json`) and GET `/ui/...` answer anyone. With auth on, `ServerGate` asks every
request for a known API key first, so nothing but the health check `/ok` answers without one (and a CORS
preflight, which carries no header and is answered without content). The key is checked by the same
function as LangGraph's `authenticate` (recollect.service.access.account_for_key), with the same 401s.

With auth on or off it also answers a copy of a thread the caller cannot see as not found: LangGraph's copy
route says 409 for a thread it does not find, and with auth on for one that is another user's, which tells a
caller that the thread exists. 404 tells nothing.

It also serves recollect's MCP endpoint (`/mcp`, recollect.service.mcp), which replaces LangGraph's.
"""

from __future__ import annotations

import json
import re

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from recollect.service.access import AccessError, account_for_key
from recollect.service.mcp import ROUTES as MCP_ROUTES

OPEN_PATHS = frozenset({"/ok"})
_COPY = re.compile(r"^/threads/[^/]+/copy/?$")
_NOT_FOUND = json.dumps({"detail": "Thread not found"}).encode()


def _json_response(status: int, body: bytes) -> tuple[Message, Message]:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {"type": "http.response.start", "status": status, "headers": headers}, \
        {"type": "http.response.body", "body": body}


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("utf-8", errors="replace")
    return ""


def _exempt(scope: Scope) -> bool:
    """Requests that need no key: the health check, LangGraph's in-process calls (its SDK's loopback transport
    mounts them under root path /noauth, which no request from outside can set) and CORS preflights."""
    root = scope.get("root_path") or ""
    if root == "/noauth" or root.startswith("/noauth/"):
        return True
    if scope.get("path") in OPEN_PATHS:
        return True
    return scope.get("method") == "OPTIONS" and bool(_header(scope, b"access-control-request-method"))


class ServerGate:
    """Pure ASGI middleware (streams pass through untouched): the API-key check and the copy's not-found."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not _exempt(scope):
            from recollect.service.auth import accounts

            known = accounts()
            if known is not None:
                try:
                    account_for_key(known, _header(scope, b"x-api-key"))
                except AccessError as exc:
                    await self._refuse(scope, send, exc)
                    return
        if scope["type"] == "http" and scope.get("method") == "POST" and _COPY.match(scope.get("path") or ""):
            await self.app(scope, receive, _not_found_for_conflict(send))
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope: Scope, send: Send, exc: AccessError) -> None:
        if scope["type"] == "websocket":  # closing before accepting answers the handshake with 403
            await send({"type": "websocket.close", "code": 1008, "reason": str(exc)[:120]})
            return
        for message in _json_response(exc.status, json.dumps({"detail": str(exc)}).encode()):
            await send(message)


def _not_found_for_conflict(send: Send) -> Send:
    """`send`, with a 409 response replaced by a 404 "Thread not found" (the copy route's only 409)."""
    replacing = False

    async def relay(message: Message) -> None:
        nonlocal replacing
        if message["type"] == "http.response.start" and message.get("status") == 409:
            replacing = True
            return
        if not replacing:
            await send(message)
            return
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            for part in _json_response(404, _NOT_FOUND):
                await send(part)

    return relay


# Its own routes are recollect's MCP endpoint; LangGraph mounts its routes behind this app's middleware too.
app = Starlette(routes=MCP_ROUTES, middleware=[Middleware(ServerGate)])
