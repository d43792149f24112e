"""MRAgent's two tool protocols, read into one form.

`parse_reply` turns a navigate reply into `{calls, answer, keep, prune, reason, form}` whichever way
the model spoke: native `tool_calls`, a JSON navigate object, a JSON answer object, or bare
`{name, arguments}` objects. The keep/prune decision comes from the JSON `keep`/`prune` fields or
from the `keep_memories` pseudo-tool (native protocol); route applies it and never executes it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import json_repair
from pydantic import BaseModel, ValidationError

from recollect.graphs.mragent.schemas import FinalReply, KeepMemoriesArgs, ids_of
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.llm.structured import json_format_kwargs, json_objects, resolve_method

KEEP_TOOL = "keep_memories"
# A navigate reply is cut at this many tokens; a reply cut there keeps its complete calls (`_reply_objects`).
# Replies with calls and a short keep list take 70 to 250 tokens; one that lists ids until the cap cost 500
# tokens (about 40 s of decoding) on the decisive rows.
NAVIGATE_MAX_TOKENS = 320
NAVIGATE_MAX_TOKENS_UNBOUNDED = 500  # mra_reply_bounds off: the cap of before
MAX_REPAIR_CHARS = 8000


def json_bound(model: Any, ctx: MRAgentContext, schema: type[BaseModel], max_tokens: int) -> Any:
    """The model constrained to a JSON schema where the endpoint supports it (no tools bound)."""
    # function_calling binds no response format here: the JSON protocol reads the reply's text
    return model.bind(max_tokens=max_tokens, **json_format_kwargs(schema, resolve_method(model, ctx.structured_method)))


def keep_tool() -> Any:
    """`keep_memories` as a LangChain tool, bound next to the traversal tools (never executed)."""
    from langchain_core.tools import StructuredTool

    from recollect.prompts import load_prompt

    def keep_memories(keep: list[str] | None = None, prune: list[str] | None = None) -> str:
        return "noted"  # route applies the decision; the graph never runs this function

    return StructuredTool.from_function(func=keep_memories, name=KEEP_TOOL, args_schema=KeepMemoriesArgs,
                                        description=load_prompt("mragent", "keep_tool").strip())


def call_args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except (json.JSONDecodeError, RecursionError):  # a model can nest arguments deeper than Python parses
            return raw
    return {} if raw is None else raw


def call_text(entry: dict[str, Any]) -> str:
    return f"{entry['tool']}({json.dumps(entry.get('args'), ensure_ascii=False, default=str)})"


def _take_keep_calls(out: dict[str, Any]) -> None:
    """Move `keep_memories` calls out of the call list into keep/prune."""
    rest = []
    for c in out["calls"]:
        if c["tool"].strip() != KEEP_TOOL:
            rest.append(c)
            continue
        args = c["args"] if isinstance(c["args"], dict) else {}
        out["keep"] += ids_of(args.get("keep", args.get("ids")))
        out["prune"] += ids_of(args.get("prune"))
        out["keep_tool"] = True
    out["calls"] = rest


def _is_reply(obj: Any) -> bool:
    return isinstance(obj, dict) and bool({"mode", "calls", "answer"} & set(obj))


def _reply_objects(content: str) -> list[Any]:
    """The JSON objects of a navigate reply. A reply cut at its token cap (the 1.5B model lists `keep` ids until
    it runs out) is never closed: only its inner objects parse, and its calls would be lost. Then the reply from
    its first brace is closed by json-repair and read first, less its last call when the cut fell inside the
    call list (that call may be cut short)."""
    objs = json_objects(content)
    start = content.find("{")
    if start < 0 or len(content) - start > MAX_REPAIR_CHARS:
        return objs
    text = content[start:].replace("```", "").strip()
    try:
        json.JSONDecoder().raw_decode(text)
        return objs  # the reply's object is closed: read as it is
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        whole = json_repair.loads(text)
    except (ValueError, RecursionError):
        return objs
    if not isinstance(whole, dict) or not _is_reply(whole):
        return objs
    calls = whole.get("calls")
    if isinstance(calls, list) and calls and not re.search(r'"calls"\s*:\s*\[.*\]\s*,\s*"', text, re.S):
        whole["calls"] = calls[:-1]
    return [whole, *(o for o in objs if not _is_reply(o))]


def parse_reply(raw: dict[str, Any] | None) -> dict[str, Any]:
    """One navigate reply → `{calls: [{tool, args}], answer: {...} | None, keep, prune, reason, form}`.

    Order (the `route` node, README.md in this folder): native tool_calls; a JSON navigate object; a JSON answer object;
    bare `{name, arguments}` objects or lists of them. Keep/prune is read from every form.
    """
    out: dict[str, Any] = {"calls": [], "answer": None, "keep": [], "prune": [], "reason": None, "form": None}
    raw = raw or {}
    objs = _reply_objects(raw.get("content") or "")
    for obj in objs:
        if isinstance(obj, dict):
            out["keep"] += ids_of(obj.get("keep"))
            out["prune"] += ids_of(obj.get("prune"))
            if out["reason"] is None and isinstance(obj.get("reason") or obj.get("why"), str):
                out["reason"] = obj.get("reason") or obj.get("why")
    if raw.get("tool_calls"):
        out["calls"] = [{"tool": str(tc.get("name") or ""), "args": call_args(tc.get("args"))}
                        for tc in raw["tool_calls"]]
        _take_keep_calls(out)
        if out["calls"]:
            out["form"] = "native"
            return out
    for obj in objs:
        if isinstance(obj, dict) and isinstance(obj.get("calls"), list) and obj.get("mode", "navigate") == "navigate":
            for c in obj["calls"]:
                if isinstance(c, dict):
                    name = c.get("tool") or c.get("name") or ""
                    out["calls"].append({"tool": str(name), "args": call_args(c.get("args", c.get("arguments")))})
            _take_keep_calls(out)
            if out["calls"]:
                out["form"] = "json_navigate"
                return out
    for obj in objs:
        if isinstance(obj, dict) and (obj.get("mode") == "answer" or ("answer" in obj and "calls" not in obj)):
            try:
                out["answer"] = FinalReply.model_validate(obj).model_dump()
            except ValidationError:
                continue
            if out["answer"]["answer"].strip():
                out["form"] = "json_answer"
                return out
            out["answer"] = None
    bare: list[dict[str, Any]] = []
    for obj in objs:
        items = obj if isinstance(obj, list) else [obj]
        for it in items:
            if isinstance(it, dict) and isinstance(it.get("function"), dict):  # OpenAI-style wrapper
                it = it["function"]
            if isinstance(it, dict) and isinstance(it.get("name"), str) and ("arguments" in it or "args" in it
                                                                            or "parameters" in it):
                args = it.get("arguments", it.get("args", it.get("parameters")))
                bare.append({"tool": it["name"], "args": call_args(args)})
    out["calls"] = bare
    _take_keep_calls(out)
    if out["calls"]:
        out["form"] = "bare"
    elif out["keep"] or out["prune"]:
        out["form"] = "keep_only"
    return out


def _norm_args(args: Any) -> str:
    if isinstance(args, dict):
        clean = {str(k).strip().lower(): (v.strip().lower() if isinstance(v, str) else v) for k, v in args.items()}
        return json.dumps(clean, sort_keys=True, default=str)
    return json.dumps(args, sort_keys=True, default=str)


def call_key(tool: str, args: Any) -> str:
    """The identity of a call for the repeat rule (same tool, same normalised arguments)."""
    return f"{tool.strip()}|{_norm_args(args)}"
