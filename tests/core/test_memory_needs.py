"""Asking a method whose memory is missing, or built for fewer sessions than the namespace holds, is a
clear error that names the namespace, the method and the command that builds it; nothing runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from recollect.cli import main
from recollect.graphs.registry import GRAPH_NEEDS, METHODS, AllMethodsContext, missing_memory
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.runner import MemoryNotBuiltError, ask
from tests.helpers import make_conversation

ONE = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "nice")]], conv_id="conv-cat")
TWO = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "nice")],
                         [("Ann", "Pixel turned two today"), ("Bob", "happy birthday")]], conv_id="conv-cat")
ANSWER = {"answer": "Pixel", "supports": ["D1:1"]}


def test_missing_memory_reads_the_registry() -> None:
    built = {"memr3": {"hash": "h", "sessions": 3}, "hymem": {"hash": "h", "sessions": 2}}
    assert missing_memory("memr3", built, 3) is None
    assert missing_memory("rag", built, 3) is None  # rag reads MemR3's chunks
    assert missing_memory("full_context", {}, 3) is None  # reads the turns alone
    assert missing_memory("hymem", built, 3) == ("hymem", 2)
    assert missing_memory("mragent", built, 3) == ("mragent", None)
    assert {m for m in METHODS if missing_memory(m, {}, 1)} == {m for m, b in GRAPH_NEEDS.items() if b}


def test_a_method_never_built_is_refused_before_any_model_call(data_dir: str) -> None:
    model = scripted(default=ANSWER)
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model)
    ingest_conversation(ONE, "alice", ctx, methods=["memr3"])
    with pytest.raises(MemoryNotBuiltError, match=r"'alice' has no hymem memory.*--namespace alice --methods hymem"):
        ask("alice", "What is the cat called?", "hymem", ctx)
    assert model.calls == []
    assert ask("alice", "What is the cat called?", "full_context", ctx)["answer"] == "Pixel"
    assert ask("alice", "What is the cat called?", "rag", ctx)["answer"] == "Pixel"


def test_a_memory_built_for_fewer_sessions_is_refused_until_completed(data_dir: str) -> None:
    model = scripted(default=ANSWER)
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model)
    ingest_conversation(ONE, "alice", ctx, methods=["memr3"])
    ingest_conversation(TWO, "alice", ctx, methods=[])  # the new session's turns only
    with pytest.raises(MemoryNotBuiltError, match=r"memr3 memory for 1 of its 2 sessions: method 'rag' reads"):
        ask("alice", "How old is the cat?", "rag", ctx)
    assert model.calls == []
    ingest_conversation(TWO, "alice", ctx, methods=["memr3"])  # incremental: builds session 2
    assert ask("alice", "How old is the cat?", "rag", ctx)["answer"] == "Pixel"


def test_an_injected_retriever_needs_no_built_memory(data_dir: str) -> None:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class One(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
            return [Document(id="D1:1", page_content="Ann: my cat is called Pixel")]

    ctx = AllMethodsContext(data_dir=data_dir, chat_model=scripted(default=ANSWER), retriever=One())
    assert ask("anyone", "What is the cat called?", "rag", ctx)["answer"] == "Pixel"


def test_cli_names_namespace_method_and_command(
    capsys: pytest.CaptureFixture[str], data_dir: str, sample_path: Path
) -> None:
    assert main(["--data-dir", data_dir, "ingest", str(sample_path), "-n", "a@b.com", "--methods", "memr3"]) == 0
    capsys.readouterr()
    code = main(["--data-dir", data_dir, "ask", "Who is Biscuit?", "-n", "a@b.com", "-m", "mgretrieval"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: namespace 'a@b.com' has no mgretrieval memory")
    assert "`recollect ingest FILE --namespace a@b.com --methods mgretrieval`" in err
    assert not (Path(data_dir) / "checkpoints.sqlite").exists()  # refused before the thread store opened
