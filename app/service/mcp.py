"""recollect's MCP endpoint on `recollect serve` (`/mcp`, streamable HTTP): a desktop or IDE client asks and
remembers through it.

It replaces LangGraph's generic one (the generated config sets `disable_mcp` and mounts recollect.service.http's
app, which serves these routes, with `enable_custom_route_auth`, so every request passes recollect's auth
handlers first). What changes for a client:

- tools carry their graph's description and ask only for what a model should write (recollect.service.mcp_tools);
  `remember` is a tool; no tool takes a server path;
- an answering tool returns `{answer, supports, method, cost}`, as text and as `structuredContent`;
- the namespace is the caller's: with auth on, one of the namespaces of its API key (the default its own),
  with auth off what the URL's `?namespace=` says, else the model names it;
- every run goes through the server's API with the caller's key, so the auth rules decide as for any client,
  and a refused or failed call is an MCP tool error the model can read (`isError`), never an HTTP 500;
- an assistant the caller created without a name is `<graph>_<id>`, never `Untitled`; nobody else's shows.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from recollect.service.mcp_tools import (
    Tool,
    catalog,
    input_schema,
    namespace_property,
    output_schema,
    tool_annotations,
)

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
INVALID_PARAMS, METHOD_NOT_FOUND, INVALID_REQUEST = -32602, -32601, -32600
_FORWARDED = ("x-api-key", "authorization")  # what the auth handlers read; nothing else of the request is sent on
INSTRUCTIONS = ("recollect answers questions from the remembered conversations of a namespace and remembers new "
                "ones. Ask with `memr3` (or a cheaper `rag`); remember what was said with `remember`.")


class ToolError(Exception):
    """A tool call the server refused or that failed: reported to the model as an MCP tool error."""


def _client() -> Any:
    """The server's own API, in process (LangGraph's loopback transport); no key of this process is sent."""
    from langgraph_sdk import get_client

    return get_client(url=None, api_key=None)


def _headers(request: Request) -> dict[str, str]:
    return {name: request.headers[name] for name in _FORWARDED if name in request.headers}


def _caller_namespaces(request: Request) -> list[str] | None:
    """The namespaces the caller's API key may use; None when auth is off (any namespace)."""
    from recollect.service.auth import accounts

    if accounts() is None:
        return None
    user = request.scope.get("user")
    return sorted(getattr(user, "namespaces", None) or [])


def _default_namespace(request: Request, allowed: list[str] | None) -> str | None:
    """`?namespace=` of the MCP URL (checked by the server like any namespace a client names), else with
    auth on the one named like the user, or its only one."""
    asked = request.query_params.get("namespace")
    if asked and (allowed is None or asked in allowed):
        return asked
    if not allowed:
        return None
    user = getattr(request.scope.get("user"), "identity", None)
    return user if user in allowed else allowed[0] if len(allowed) == 1 else None


async def _tools(request: Request) -> dict[str, Tool]:
    found = await _client().assistants.search(limit=1000, headers=_headers(request))
    return catalog(list(found))


async def _list(request: Request) -> dict[str, Any]:
    allowed = _caller_namespaces(request)
    default = _default_namespace(request, allowed)
    out = []
    for tool in (await _tools(request)).values():
        namespace = namespace_property(allowed, tool.namespace or default)
        entry: dict[str, Any] = {"name": tool.name, "title": tool.name, "description": tool.description,
                                 "inputSchema": input_schema(tool, namespace), "annotations": tool_annotations(tool)}
        schema = output_schema(tool)
        if schema is not None:
            entry["outputSchema"] = schema
        out.append(entry)
    return {"tools": out}


def _run_input(tool: Tool, args: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The graph's input from the tool's arguments (only the ones its schema names)."""
    if tool.kind() == "answer":
        question = args.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ToolError("`question` must be a non-empty string")
        return {"namespace": namespace, "question": question.strip()}
    if tool.graph == "remember":
        if not isinstance(args.get("messages"), list):
            raise ToolError("`messages` must be a list of {role, content} objects")
        return {"namespace": namespace, "messages": args["messages"], "thread": args.get("thread")}
    if tool.graph == "ingest":
        return {"namespace": namespace, "dialogue": args.get("dialogue"), "conversation_id": args.get("conversation_id")}
    return {"namespace": namespace}


def _result(tool: Tool, value: Any) -> dict[str, Any]:
    if tool.kind() == "answer":
        out = {k: value.get(k) for k in ("answer", "supports", "method", "cost")}
        out["supports"] = list(out["supports"] or [])
        out["cost"] = out["cost"] or {}
    elif tool.graph == "remember":
        out = {k: value.get(k) for k in ("added", "skipped", "queued")}
    else:
        out = {k: v for k, v in value.items() if k in ("reports", "forgotten", "namespace")}
    result: dict[str, Any] = {"content": [{"type": "text", "text": json.dumps(out, ensure_ascii=False)}],
                              "isError": False}
    if output_schema(tool) is not None:
        result["structuredContent"] = out
    return result


def _refusal(exc: httpx.HTTPStatusError) -> str:
    try:
        detail = exc.response.json().get("detail")
    except ValueError:
        detail = None
    reason = {401: "unauthenticated", 403: "forbidden", 404: "not found", 409: "conflict"}.get(
        exc.response.status_code, f"refused ({exc.response.status_code})")
    return f"{reason}: {detail or exc.response.text[:300]}"


async def _call(request: Request, params: dict[str, Any]) -> dict[str, Any]:
    tools = await _tools(request)
    tool = tools.get(str(params.get("name") or ""))
    if tool is None:
        return {"error": {"code": INVALID_PARAMS, "message": f"unknown tool {params.get('name')!r} "
                                                             f"(tools: {', '.join(tools)})"}}
    args = params.get("arguments") or {}
    allowed = _caller_namespaces(request)
    namespace = (args.get("namespace") if isinstance(args, dict) else None) or tool.namespace \
        or _default_namespace(request, allowed)
    try:
        if not isinstance(args, dict):
            raise ToolError("arguments must be an object")
        if not isinstance(namespace, str) or not namespace:
            raise ToolError("no namespace: pass `namespace`, or add ?namespace=... to the MCP server's URL")
        value = await _client().runs.wait(None, tool.assistant, input=_run_input(tool, args, namespace),
                                          headers=_headers(request), raise_error=False)
        if isinstance(value, dict) and "__error__" in value:
            error = value["__error__"]
            raise ToolError(f"{error.get('error', 'Error')}: {error.get('message', '')}"[:1000])
        if not isinstance(value, dict):
            raise ToolError(f"the {tool.graph} run returned no result")
        return {"result": _result(tool, value)}
    except httpx.HTTPStatusError as exc:
        message = _refusal(exc)
    except ToolError as exc:
        message = str(exc)
    return {"result": {"content": [{"type": "text", "text": message}], "isError": True}}


async def endpoint(request: Request) -> Response:
    if request.method != "POST":
        return Response(status_code=405, headers={"Allow": "POST"})  # no server-sent stream to resume
    try:
        message = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}},
                            status_code=400)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return JSONResponse({"jsonrpc": "2.0", "id": None,
                             "error": {"code": INVALID_REQUEST, "message": "not a JSON-RPC 2.0 message"}},
                            status_code=400)
    if "id" not in message or "method" not in message:
        return Response(status_code=202)  # a notification or a response: nothing to answer
    method, params = message["method"], message.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        reply: dict[str, Any] = {"result": {
            "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "recollect", "version": _version()}, "instructions": INSTRUCTIONS}}
    elif method == "ping":
        reply = {"result": {}}
    elif method == "tools/list":
        async with _as_caller(request):
            reply = {"result": await _list(request)}
    elif method == "tools/call":
        async with _as_caller(request):
            reply = await _call(request, params)
    else:
        reply = {"error": {"code": METHOD_NOT_FOUND, "message": f"method not found: {method}"}}
    return JSONResponse({"jsonrpc": "2.0", "id": message["id"], **reply})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("recollect")
    except PackageNotFoundError:
        return "0"


def _as_caller(request: Request) -> Any:
    """The authenticated caller in LangGraph's auth context for the work of this request: the loopback requests
    to the API inherit it (the loopback transport skips authentication), so the auth handlers judge every run
    and search as the caller's. The route cannot do it: the auth middleware runs inside it."""
    try:
        from langgraph_api.utils import with_user
    except ImportError:  # not inside the server
        return contextlib.nullcontext()
    return with_user(request.scope.get("user"), request.scope.get("auth"))


ROUTES = [Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])]
# on its own (tests); `recollect serve` mounts ROUTES in recollect.service.http's app, behind its key check
app = Starlette(routes=ROUTES)
