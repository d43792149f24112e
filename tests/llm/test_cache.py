"""The one cached structured call of every memory builder: hits are free, failures are not kept."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage
from pydantic import BaseModel

from recollect.llm.cache import LLMCache, cached_structured_call
from recollect.llm.scripted import scripted
from recollect.memory.build import BuildReport
from recollect.memory.docstore import DocStore


class Reply(BaseModel):
    items: list[str]


def _call(cache: LLMCache, model, report: BuildReport, legacy=None):  # noqa: ANN001
    return cached_structured_call(cache, "ns:k1", model, [HumanMessage(content="list")], Reply, node="t",
                                  method="json_mode", max_tokens=50, report=report, legacy=legacy)


def test_a_valid_reply_is_cached_and_reused(tmp_path: Path) -> None:
    cache, report = LLMCache(DocStore(tmp_path / "d.db")), BuildReport("t")
    first = _call(cache, scripted([{"items": ["a"]}]), report)
    assert first.value == Reply(items=["a"]) and not first.cached and report.llm_calls == 1
    again = _call(cache, scripted([]), report)  # no reply scripted: a call would fail
    assert again.value == Reply(items=["a"]) and again.cached and report.cached_calls == 1


def test_a_failed_reply_is_asked_again_on_the_next_ingest(tmp_path: Path) -> None:
    cache, report = LLMCache(DocStore(tmp_path / "d.db")), BuildReport("t")
    bad = _call(cache, scripted(["not json", "still not json"]), report)
    assert bad.value is None and bad.error and not bad.cached
    good = _call(cache, scripted([{"items": ["b"]}]), report)
    assert good.value == Reply(items=["b"]) and not good.cached


def test_older_cache_formats_are_read(tmp_path: Path) -> None:
    cache, report = LLMCache(DocStore(tmp_path / "d.db")), BuildReport("t")
    cache.put("ns:k1", {"value": {"items": ["old"]}, "error": None})  # MGRetrieval's earlier entries
    assert _call(cache, scripted([]), report).value == Reply(items=["old"])
    cache.put("ns:k1", {"ok": False, "error": "bad"})  # a cached failure is not a reply
    assert _call(cache, scripted([{"items": ["new"]}]), report).value == Reply(items=["new"])
    cache.put("ns:k1", {"items": ["hymem"]})
    out = _call(cache, scripted([]), report, legacy=lambda hit: {"items": hit["items"]} if "items" in hit else None)
    assert out.value == Reply(items=["hymem"]) and out.cached
