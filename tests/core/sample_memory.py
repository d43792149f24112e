"""The sample dialogue ingested for every method with a scripted model, and that model's replies: shared by
the chat-stream, follow-up and async tests (no real model, no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recollect.dialogue.loaders import load_conversation
from recollect.graphs.registry import AllMethodsContext, available_builders
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel, scripted
from tests.service.scripted_endpoint import scripted_callable

ROOT = Path(__file__).resolve().parents[2]
METHODS = ["memr3", "rag", "full_context", "mragent", "hymem", "mgretrieval"]
REWRITES = {"And where does she work?": "Where does Maya work?"}


def replies(messages: list[Any], kwargs: dict[str, Any]) -> str:
    """A valid reply to every structured call (tests.service.scripted_endpoint), and the follow-up
    rewrites of REWRITES for the `standalone_question` prompt."""
    prompt = "\n".join(str(m.content) for m in messages)
    if "Last question:" in prompt:
        asked = prompt.rsplit("Last question:", 1)[1].split("\n", 1)[0].strip()
        return json.dumps({"question": REWRITES.get(asked, asked)})
    return scripted_callable(messages, kwargs)


def scripted_model() -> ScriptedChatModel:
    return scripted(default=replies)


def ingest_sample(data_dir: str, namespace: str = "sample", replace: dict[str, str] | None = None) -> None:
    """The sample dialogue in `namespace` for every method, each `replace` key in its text replaced."""
    text = (ROOT / "examples" / "sample_dialogue.json").read_text(encoding="utf-8")
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    path = Path(data_dir).parent / f"{Path(data_dir).name}-{namespace}.json"
    path.write_text(text, encoding="utf-8")
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=scripted(default=scripted_callable))
    ingest_conversation(load_conversation(path), namespace, ctx, methods=available_builders())
