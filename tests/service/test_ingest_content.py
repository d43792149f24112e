"""The served `ingest` graph takes dialogue content, never a path: both formats as an object or as JSON text,
a size limit, and one clear error per bad input that quotes none of the content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from recollect.dialogue.models import DialogueError
from recollect.graphs.ingest import conversation_from_content, graph
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import scripted
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import Workspace, register_workspace
from tests.service.scripted_endpoint import scripted_callable

ROOT = Path(__file__).resolve().parents[2]
SIMPLE = json.loads((ROOT / "examples" / "sample_dialogue.json").read_text())
LOCOMO = {"sample_id": "conv-x", "conversation": {
    "speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat called Miso."},
                  {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely name!"}]}}


@pytest.mark.parametrize("content", [SIMPLE, json.dumps(SIMPLE), LOCOMO, [LOCOMO], json.dumps(LOCOMO)])
def test_both_formats_as_object_or_text(content: Any) -> None:
    conversation = conversation_from_content(content)
    assert conversation.id in ("sample-maya-theo", "conv-x") and conversation.sessions[0].turns


def _with(path: list[Any], value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(SIMPLE))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


SECRET = "Pelican-7 launch codes"


@pytest.mark.parametrize(("content", "message"), [
    (None, "pass the dialogue's content"),
    ("", "pass the dialogue's content"),
    ("/etc/passwd", "not valid JSON"),
    (42, "expected a JSON object, a list or JSON text, got int"),
    ("[1, 2", "not valid JSON"),
    (_with(["sessions", 0, "turns", 0, "speaker"], SECRET), r"sessions\[0\]\.turns\[0\]\.speaker"),
    (_with(["sessions", 0, "turns", 1, "id"], ""), r"sessions\[0\]\.turns\[1\]\.id: must be a non-empty string"),
    (_with(["sessions", 1, "turns", 0, "id"], "D1:1"), "duplicate turn id"),
    (_with(["sessions"], [{"date_time": "2023-05-01", "turns": []}]), "no turns"),
    ([SIMPLE, SIMPLE], "conversation id '…' appears more than once"),
    ({"sample_id": SECRET, "conversation": {"speaker_a": "A", "speaker_b": "B"}},
     r"dialogue: \[0\]: conversation has no non-empty 'session_N' list"),
    ([LOCOMO, dict(LOCOMO, sample_id=SECRET, conversation={})], r"dialogue: \[1\]: field 'conversation.speaker_a'"),
    # issue 37: text no store can hold, and nesting deeper than Python's recursion limit
    (_with(["sessions", 0, "turns", 0, "text"], SECRET + " \ud800"),
     r"dialogue: sessions\[0\]\.turns\[0\]\.text: holds a lone UTF-16 surrogate \(U\+D800 at character 23\)"),
    (json.dumps(SIMPLE).replace("Biscuit", "Bis\\udc00cuit", 1), r"sessions\[\d+\]\.turns\[\d+\]\.text: holds a lone"),
    (json.dumps(LOCOMO).replace("Miso", "Miso\\ud800"), r"dialogue: conversation\.session_1\[0\]\.text: holds"),
    ({"sessions": [{"turns": [{"speaker": "A", "text": "hi", SECRET + "\ud800": 1}]}]},
     r"sessions\[0\]\.turns\[0\]: a key holds a lone"),
    ("bad \ud800 " + SECRET, "the text holds a lone UTF-16 surrogate at character 4"),
    ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels deep"),
    (_with(["sessions", 0, "turns", 0, "text"], json.loads("[" * 900 + "]" * 900)), "nested more than 64 levels deep"),
])
def test_bad_content_is_one_error_quoting_none_of_it(content: Any, message: str) -> None:
    with pytest.raises(DialogueError, match=message) as bad:
        conversation_from_content(content)
    text = str(bad.value)
    assert text.startswith("dialogue: ") and "Pelican" not in text and "/etc/passwd" not in text and len(text) <= 300


def test_size_limit_and_conversation_choice() -> None:
    with pytest.raises(DialogueError, match=r"over the server's limit of 1,000 \(RECOLLECT_INGEST_MAX_BYTES\)"):
        conversation_from_content(SIMPLE, max_bytes=1000)
    two = [dict(SIMPLE, id="a"), dict(SIMPLE, id="b")]
    with pytest.raises(DialogueError, match="holds 2 conversations; pass conversation_id"):
        conversation_from_content(two)
    assert conversation_from_content(two, "b").id == "b"
    with pytest.raises(DialogueError, match="no conversation has the given conversation_id"):
        conversation_from_content(two, "c")


def test_the_graph_ingests_content_and_reads_no_path(tmp_path: Path) -> None:
    data = tmp_path / "data"
    register_workspace(Workspace(data, embeddings=HashEmbeddings()))
    ctx = AllMethodsContext(data_dir=str(data), chat_model=scripted(default=scripted_callable))
    out = graph.invoke({"namespace": "posted", "dialogue": SIMPLE, "methods": ["memr3"]}, context=ctx)
    assert [r["method"] for r in out["reports"]] == ["turns", "memr3"]
    with pytest.raises(DialogueError, match="the server reads no file path"):
        graph.invoke({"namespace": "other", "path": str(ROOT / "examples" / "sample_dialogue.json")}, context=ctx)
    with pytest.raises(ValueError, match="unknown method"):
        graph.invoke({"namespace": "other", "dialogue": SIMPLE, "methods": ["nope"]}, context=ctx)
    # issue 37: text the store cannot hold failed with a raw TypeError after the turns' collection was made
    nested = {"sessions": [{"turns": [{"speaker": "A", "text": "hi"}] * 2 + [{"speaker": "A", "text": "x" * 9}]}]}
    nested["sessions"][0]["turns"][2]["text"] = "bad \ud800 text"
    for bad in (nested, json.dumps(nested), "[" * 100_000):
        with pytest.raises(DialogueError, match=r"turns\[2\]\.text: holds a lone|nested more than 64"):
            graph.invoke({"namespace": "broken", "dialogue": bad, "methods": ["memr3"]}, context=ctx)
    ws = Workspace(data, embeddings=HashEmbeddings())
    assert ws.docs.namespaces() == ["posted"]
    assert not [c for c in ws.client.list_collections() if "broken" in (c if isinstance(c, str) else c.name)]
