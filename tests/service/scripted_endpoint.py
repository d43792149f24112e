"""A scripted model for the service tests: no real model, no network.

`schema_reply` answers any structured call with a valid instance of the JSON schema it was sent,
choosing the values that end a method's loop ("answer", sufficient, satisfied) and naming the
sample dialogue's facts the question asks about. `ScriptedEndpoint` serves it as an
OpenAI-compatible `/v1/chat/completions` on 127.0.0.1, so `recollect serve` (another process)
can be pointed at it with RECOLLECT_LLM_BASE_URL.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from recollect.llm.local_runtime import free_port

# The question's last word picks the scripted answer (the sample dialogue's facts).
ANSWERS = {"dog": "Biscuit", "work": "a bakery", "bowl": "March 2023"}
ENDING_VALUES = ("answer", "final", "sufficient", "satisfied", "stop", "done")


def _answer_for(prompt: str) -> str:
    # on one line: a section header that ends in "question:" (e.g. "Turns most similar to the question:")
    # is not the question
    asked = re.findall(r"question\W*:[ \t]*(\S.*)", prompt, flags=re.IGNORECASE)
    question = asked[-1].lower() if asked else ""
    for word, answer in ANSWERS.items():
        if word in question:
            return answer
    return "No information available"


def _instance(schema: dict[str, Any], defs: dict[str, Any], key: str, prompt: str) -> Any:
    if "$ref" in schema:
        return _instance(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, key, prompt)
    for combo in ("anyOf", "oneOf", "allOf"):
        if combo in schema:
            options = [s for s in schema[combo] if s.get("type") != "null"] or schema[combo]
            return _instance(options[0], defs, key, prompt)
    if "enum" in schema:
        return next((v for v in schema["enum"] if v in ENDING_VALUES), schema["enum"][0])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if kind == "object":
        return {name: _instance(sub, defs, name, prompt) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return schema.get("minimum", 1) if kind == "integer" else 1.0
    if "answer" in key:
        return _answer_for(prompt)
    if key in ("decision", "action", "next"):
        return "answer"
    return "memory"


def schema_reply(prompt: str, response_format: dict[str, Any] | None) -> str:
    """The JSON text a well-behaved model would send for this prompt and response format."""
    schema = (response_format or {}).get("schema") or ((response_format or {}).get("json_schema") or {}).get("schema")
    if not schema:
        return json.dumps({"answer": _answer_for(prompt), "supports": []})
    return json.dumps(_instance(schema, schema.get("$defs") or {}, "", prompt))


def scripted_callable(messages: list[Any], kwargs: dict[str, Any]) -> str:
    """`ScriptedChatModel(default=...)` form of `schema_reply`, for in-process ingestion."""
    prompt = "\n".join(str(m.content) for m in messages)
    return schema_reply(prompt, kwargs.get("response_format"))


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        return

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._send({"data": [{"id": "scripted", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        prompt = "\n".join(str(m.get("content")) for m in body.get("messages") or [])
        content = schema_reply(prompt, body.get("response_format"))
        self.server.calls += 1  # type: ignore[attr-defined]
        self._send({
            "id": "scripted", "object": "chat.completion", "created": 0, "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(content.split()),
                      "total_tokens": len(prompt.split()) + len(content.split())},
        })

    def _send(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ScriptedEndpoint:
    """`with ScriptedEndpoint() as url:` an OpenAI-compatible base URL answering with `schema_reply`."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
        self.server.calls = 0  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def calls(self) -> int:
        return int(self.server.calls)  # type: ignore[attr-defined]

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
