"""Namespaces are the app's own ids (`a@b.com`, `auth0|123`, names in any script): any printable text of
1–200 characters. Chroma gets a safe derived name; names valid before keep their collections."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from recollect.cli import main
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.cache import LLMCache, cache_key
from recollect.llm.scripted import scripted
from recollect.memory.workspace import NamespaceError, open_workspace, storage_name, validate_namespace
from recollect.runner import ask, forget
from tests.helpers import make_conversation

APP_IDS = ["a@b.com", "auth0|123", "Zoë Ångström", "名前", "名字", "a:b", "a", "x" * 200, "../../etc", "O'Brien \"x\""]
# Chroma's rule for collection names (older releases allow 63 characters at most).
CHROMA_NAME = re.compile(r"^[A-Za-z0-9](?!.*\.\.)[A-Za-z0-9._-]{1,61}[A-Za-z0-9]$")
LONGEST_KIND = "hymem_summaries"


@pytest.mark.parametrize("namespace", APP_IDS)
def test_app_ids_are_valid_and_stored_under_a_chroma_name(namespace: str) -> None:
    assert validate_namespace(namespace) == namespace
    name = storage_name(namespace)
    assert name == storage_name(namespace) and CHROMA_NAME.match(f"{LONGEST_KIND}-{name}"), name


def test_storage_names_are_distinct_and_readable() -> None:
    names = [storage_name(n) for n in APP_IDS]
    assert len(set(names)) == len(names)  # "名前" and "名字" share no readable part, only the hash differs
    assert storage_name("a@b.com").startswith("a_b_com.") and storage_name("Zoë Ångström").startswith("Zoe_Angstrom.")


@pytest.mark.parametrize("plain", ["demo", "conv-26", "locomo-conv-26-s3", "a_b", "x" * 62, "A1"])
def test_names_valid_before_keep_their_storage_name(plain: str) -> None:
    assert storage_name(plain) == plain  # so existing data directories keep their collections


@pytest.mark.parametrize(
    ("bad", "why"),
    [("", "empty"), ("x" * 201, "201 characters"), ("a\nb", "non-printable"), ("tab\tx", "non-printable"),
     ("nul\x00", "non-printable"), ("\u200bzero-width", "non-printable"), ("bad\ud800", "non-printable"),
     (" lead", "space"), ("trail ", "space"), (42, "must be a string")],
)
def test_bad_ids_are_clear_errors(bad: object, why: str) -> None:
    with pytest.raises(NamespaceError, match=f"invalid namespace.*{why}"):
        validate_namespace(bad)


def _answer_from_prompt(msgs: list, kw: dict) -> dict:
    prompt = "\n".join(str(m.content) for m in msgs)
    found = re.search(r"my cat is called (\w+)", prompt)
    return {"answer": found[1] if found else "No information available", "supports": ["D1:1"]}


def test_each_app_id_reads_only_its_own_memory_and_forget_touches_no_other(data_dir: str) -> None:
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=scripted(default=_answer_from_prompt))
    ws = open_workspace(data_dir)
    cats = {ns: f"Cat{i}" for i, ns in enumerate(APP_IDS)}
    for ns, cat in cats.items():
        conv = make_conversation([[("Ann", f"my cat is called {cat}"), ("Bob", "nice")]], conv_id=f"c{cat}")
        ingest_conversation(conv, ns, ctx, methods=["memr3"])
        LLMCache(ws.docs).put(cache_key(ns, "baselines", "answer", "m", 0.0, {}), {"v": ns})
    assert set(ws.docs.namespaces()) == set(APP_IDS)
    for ns, cat in cats.items():
        assert ask(ns, "What is Ann's cat called?", "rag", ctx)["answer"] == cat

    def cached(ns: str) -> object:
        return ws.docs.cache_get(cache_key(ns, "baselines", "answer", "m", 0.0, {}))

    removed = forget("a", ctx)  # "a:" also starts every cache key of "a:b"
    assert removed["collections"] >= 2 and cached("a") is None
    assert cached("a:b") == {"v": "a:b"} and ask("a:b", "What is Ann's cat called?", "rag", ctx)["answer"] == cats["a:b"]
    forget("a@b.com", ctx)
    left = {c.name for c in ws.client.list_collections()}
    assert not any(storage_name("a@b.com") in name for name in left)
    assert any(name.endswith("-" + storage_name("auth0|123")) for name in left)
    assert set(ws.docs.namespaces()) == set(APP_IDS) - {"a", "a@b.com"}


def test_plain_names_keep_the_collection_names_of_earlier_data_dirs(data_dir: str) -> None:
    ingest_conversation(make_conversation([[("Ann", "hi")]]), "conv-26", AllMethodsContext(data_dir=data_dir),
                        methods=["memr3"])
    names = {c.name for c in open_workspace(data_dir).client.list_collections()}
    assert names == {"turns-conv-26", "memr3c256-conv-26"}  # `<kind>-<namespace>`, as before


def test_cli_with_app_ids(capsys: pytest.CaptureFixture[str], data_dir: str, sample_path: Path) -> None:
    for ns in ("auth0|123", "Zoë Ångström"):
        assert main(["--data-dir", data_dir, "ingest", str(sample_path), "-n", ns, "--methods", "memr3"]) == 0
    assert main(["--data-dir", data_dir, "namespaces"]) == 0
    out = capsys.readouterr().out
    assert "auth0|123: conversation=sample-maya-theo" in out and "Zoë Ångström: conversation=" in out
    assert main(["--data-dir", data_dir, "ask", "hi?", "-n", "auth0|123", "-m", "hymem"]) == 2
    assert "--namespace 'auth0|123' --methods hymem" in capsys.readouterr().err  # a command that pastes into a shell
    assert main(["--data-dir", data_dir, "forget", "auth0|123"]) == 0
    assert "forgot namespace 'auth0|123'" in capsys.readouterr().out
    assert open_workspace(data_dir).docs.namespaces() == ["Zoë Ångström"]
