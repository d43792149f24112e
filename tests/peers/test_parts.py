"""The peers' small parts: reading tool calls from text, the metered client, provenance, session messages."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from benchmarks.peers.answer import answer_question, memory_lines
from benchmarks.peers.base import Found, Provenance, session_messages
from benchmarks.peers.llm import Endpoint, UsageMeter, peer_model, text_tool_calls
from recollect.dialogue.loaders import load_dialogues
from recollect.llm.scripted import ScriptedChatModel

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "eval_mini_locomo.json"
MEMORY = {"type": "function", "function": {"name": "Memory", "description": "d", "parameters": {
    "type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}}}


def test_tool_calls_in_text_forms_the_model_writes() -> None:
    doubled = ('{{"name": "Memory", "arguments": {"content": "Ann has a cat"}}}\n'
               '{{"name": "Memory", "arguments": {"content": "Bob plays violin"}}}')
    calls = text_tool_calls(doubled, {"Memory"})
    assert [c["args"] for c in calls] == [{"content": "Ann has a cat"}, {"content": "Bob plays violin"}]
    assert all(c["type"] == "tool_call" and c["id"].startswith("call_") for c in calls)
    fenced = '```json\n{"name": "Memory", "arguments": "{\\"content\\": \\"x\\"}"}\n```'
    assert text_tool_calls(fenced, {"Memory"})[0]["args"] == {"content": "x"}
    tagged = '<tool_call>\n{"name": "Memory", "parameters": {"content": "y"}}\n</tool_call>'
    assert text_tool_calls(tagged, {"Memory"})[0]["args"] == {"content": "y"}
    # only the tools that were bound, and only objects with arguments
    assert text_tool_calls('{"name": "Other", "arguments": {}}', {"Memory"}) == []
    assert text_tool_calls('{"name": "Memory"} and {"content": "z"}', {"Memory"}) == []
    assert text_tool_calls("no json at all {", {"Memory"}) == []


def test_peer_client_meters_calls_and_reads_text_tool_calls() -> None:
    meter = UsageMeter()
    model = peer_model(Endpoint("http://127.0.0.1:9/v1", "k", "m"), meter, node="langmem", max_tokens=64)
    reply = AIMessage(content='{{"name": "Memory", "arguments": {"content": "Ann has a cat"}}}',
                      usage_metadata={"input_tokens": 50, "output_tokens": 20, "total_tokens": 70})
    result = model._finish([HumanMessage(content="hi")], ChatResult(generations=[ChatGeneration(message=reply)]),
                           {"tools": [MEMORY]}, 0.5)
    assert result.generations[0].message.tool_calls[0]["args"] == {"content": "Ann has a cat"}
    usage, from_text, cut = meter.take()
    assert (usage["calls"], usage["prompt_tokens"], usage["completion_tokens"], from_text, cut) == (1, 50, 20, 1, 0)
    assert meter.take() == ({}, 0, 0)
    # without tools bound, text stays text
    plain = AIMessage(content='{"name": "Memory", "arguments": {"content": "x"}}',
                      response_metadata={"finish_reason": "length"})
    model._finish([HumanMessage(content="hi")], ChatResult(generations=[ChatGeneration(message=plain)]), {}, 0.1)
    assert plain.tool_calls == [] and meter.take().cut_replies == 1


def test_peer_client_request_payload() -> None:
    meter = UsageMeter()
    ep = Endpoint("http://127.0.0.1:9/v1", "k", "m")
    tools = peer_model(ep, meter, node="langmem", max_tokens=64)
    payload = tools._get_request_payload([HumanMessage(content="hi")], tools=[MEMORY])
    assert payload["parallel_tool_calls"] is True and payload["max_tokens"] == 64
    json_mode = peer_model(ep, meter, node="mem0", max_tokens=64, json_mode=True)
    payload = json_mode._get_request_payload([HumanMessage(content="hi")])
    assert payload["response_format"] == {"type": "json_object"} and "parallel_tool_calls" not in payload


def test_session_messages_and_provenance(tmp_path: Path) -> None:
    conv = load_dialogues(FIXTURE)[0]
    s1, s2 = conv.sessions
    msgs = session_messages(s1)
    assert msgs[0] == {"role": "user", "content": "(Conversation of 9:00 am on 3 March, 2023)"}
    assert msgs[1] == {"role": "user", "content": "Ann: I adopted a grey cat called Pixel last week."}
    prov = Provenance(tmp_path / "p.json")
    prov.apply(s1, [("a", "ADD"), ("b", "ADD")])
    prov.apply(s2, [("a", "UPDATE"), ("b", "DELETE"), ("c", "ADD")])
    prov.save()
    again = Provenance(tmp_path / "p.json")
    assert again.sessions("a") == [1, 2] and again.date_time("a") == "6:30 pm on 10 April, 2023"
    assert again.sessions("b") == [] and again.sessions("c") == [2] and again.date_time("zzz") == ""


def test_answer_uses_the_cited_memory_date(tmp_path: Path) -> None:
    conv = load_dialogues(FIXTURE)[0]
    prov = Provenance(tmp_path / "p.json")
    prov.apply(conv.sessions[0], [("old", "ADD")])
    prov.apply(conv.sessions[1], [("new", "ADD")])
    found = [Found("old", "Ann adopted a cat"), Found("new", "Bob ran the marathon yesterday"), Found("x", "undated")]
    lines, labels = memory_lines(found, prov)
    assert lines == ["[M1] 9:00 am on 3 March, 2023 | Ann adopted a cat",
                     "[M2] 6:30 pm on 10 April, 2023 | Bob ran the marathon yesterday", "[M3] undated"]
    model = ScriptedChatModel(script=[json.dumps({"answer": "yesterday", "supports": ["[M2]"]})])
    ans = answer_question(model, "When did Bob run?", found, prov, node="mem0")
    assert ans.text == "9 April 2023" and ans.model_answer == "yesterday" and ans.cited == ["new"]
    assert ans.shown == ["old", "new", "x"] and ans.usage["calls"] == 1
    model = ScriptedChatModel(script=["not json", "still not json"])
    ans = answer_question(model, "When?", [], prov, node="mem0")
    assert ans.text == "still not json" and ans.usage["calls"] == 2  # the rag baseline's fallback, retry included


def test_a_reply_cut_at_the_cap_is_returned_as_text_like_our_own_calls() -> None:
    from benchmarks.peers.llm import _cut_reply

    class LengthFinishReasonError(Exception):  # the name the OpenAI client's error has
        def __init__(self) -> None:
            super().__init__("length limit")
            usage = SimpleNamespace(prompt_tokens=30, completion_tokens=8, total_tokens=38)
            message = SimpleNamespace(content='{"facts": ["Ann has a c')
            self.completion = SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=usage)

    result = _cut_reply(LengthFinishReasonError())
    msg = result.generations[0].message
    assert msg.content == '{"facts": ["Ann has a c' and msg.usage_metadata["output_tokens"] == 8
    with pytest.raises(ValueError):
        _cut_reply(ValueError("other"))
