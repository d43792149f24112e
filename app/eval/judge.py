"""The generous LLM-as-a-Judge (categories 1–4; the caller filters).

The judge sees only the question, the gold answer and the generated answer. It asks for JSON (JSON mode
when the backend accepts it), reads the `label` leniently, falls back to a standalone upper-case
CORRECT/WRONG, and tries up to 3 times before recording `judge_error`. Readable verdicts are cached in
SQLite by a hash of (judge model, prompt version, question, gold, prediction), so re-scoring is free and
deterministic; errors are never cached, so a later run can still grade those items.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from recollect.llm.structured import json_objects
from recollect.prompts import PROMPTS_DIR

JUDGE_PROMPT_VERSION = "judge_v1"
JUDGE_PROMPT_PATH = PROMPTS_DIR / "judge" / f"{JUDGE_PROMPT_VERSION}.md"  # packaged in a wheel, else the checkout
MAX_ATTEMPTS = 3
LABELS = ("CORRECT", "WRONG")

_STANDALONE = re.compile(r"\b(CORRECT|WRONG)\b")  # case-sensitive on purpose: prose "correct" is no label


@dataclass(frozen=True)
class JudgeResult:
    label: str | None  # "CORRECT", "WRONG", or None when no attempt could be read
    score: int  # 1 only for CORRECT
    error: str | None  # judge_error: why no label could be read after all attempts
    calls: int  # model calls made for this item (0 on a cache hit)
    cached: bool = False
    reason: str | None = None
    raw: str = ""


def load_judge_prompt(path: Path = JUDGE_PROMPT_PATH) -> str:
    if not path.is_file():
        raise FileNotFoundError(f"judge prompt not found: {path}")
    return path.read_text(encoding="utf-8")


def build_judge_messages(
    question: str, gold: Any, prediction: str | None, template: str | None = None
) -> list[BaseMessage]:
    """The judge's whole input: the template filled with question, gold (as str) and the answer, nothing else."""
    text = (template or load_judge_prompt()).format(
        question=question, gold=str(gold), prediction="" if prediction is None else prediction
    )
    return [HumanMessage(content=text)]


def parse_judge_reply(text: str) -> tuple[str | None, str | None]:
    """(label, reason) from a reply: JSON `label` first (fences and prose tolerated), then a standalone word.

    A reply that names both labels outside a JSON `label` is unreadable, as the prompt forbids it.
    """
    for obj in json_objects(text):
        if isinstance(obj, dict) and isinstance(obj.get("label"), str):
            label = obj["label"].strip().upper()
            if label in LABELS:
                reason = obj.get("reason")
                return label, reason if isinstance(reason, str) else None
    found = set(_STANDALONE.findall(text))
    if len(found) == 1:
        return found.pop(), None
    return None, None


def _content_text(message: Any) -> str:
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def _looks_unsupported(exc: Exception) -> bool:
    """An error that means the backend rejected the JSON response format (so retry without it)."""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"TypeError", "BadRequestError", "UnprocessableEntityError", "NotImplementedError"})


class JudgeCache:
    """SQLite store of readable verdicts; one short-lived connection per operation keeps it thread-safe."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS judge_cache (key TEXT PRIMARY KEY, label TEXT NOT NULL, "
                "reason TEXT, raw TEXT, model TEXT, prompt_version TEXT, created REAL)"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def get(self, key: str) -> tuple[str, str | None, str] | None:
        with self._connect() as db:
            row = db.execute("SELECT label, reason, raw FROM judge_cache WHERE key = ?", (key,)).fetchone()
        return None if row is None else (row[0], row[1], row[2] or "")

    def put(self, key: str, label: str, reason: str | None, raw: str, model: str, version: str) -> None:
        with self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO judge_cache VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, label, reason, raw, model, version, time.time()),
            )


def cache_key(model_name: str, prompt_version: str, question: str, gold: Any, prediction: str | None) -> str:
    payload = [model_name, prompt_version, question, str(gold), "" if prediction is None else prediction]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


class LLMJudge:
    """Grades answers with any LangChain chat model (`.invoke(messages)` returning a message)."""

    def __init__(
        self,
        chat_model: Any,
        model_name: str,
        cache_path: str | Path | None = None,
        *,
        json_mode: bool = True,
        temperature: float | None = 0.0,
        prompt_version: str = JUDGE_PROMPT_VERSION,
        prompt_path: Path | None = None,
    ) -> None:
        self.chat_model = chat_model
        self.model_name = model_name
        self.prompt_version = prompt_version
        self.template = load_judge_prompt(prompt_path or JUDGE_PROMPT_PATH.with_name(f"{prompt_version}.md"))
        self.cache = JudgeCache(cache_path) if cache_path else None
        self.temperature = temperature
        self._json_mode = json_mode
        self._lock = threading.Lock()

    def _runnable(self, json_mode: bool) -> Any:
        kwargs: dict[str, Any] = {}
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        bind = getattr(self.chat_model, "bind", None)
        return bind(**kwargs) if kwargs and callable(bind) else self.chat_model

    def probe(self) -> None:
        """One tiny call before any work, so an unreachable judge stops the run at once with one clear
        error instead of grading every answer 0 after the run (a RuntimeError naming the model)."""
        from langchain_core.messages import HumanMessage

        try:
            self.chat_model.invoke([HumanMessage("Reply with the single word OK.")])
        except Exception as exc:  # any failure of the endpoint: connection, auth, unknown model
            raise RuntimeError(f"judge model {self.model_name!r} cannot be reached: {type(exc).__name__}: "
                               f"{str(exc)[:300]}") from None

    def judge(self, question: str, gold: Any, prediction: str | None) -> JudgeResult:
        key = cache_key(self.model_name, self.prompt_version, question, gold, prediction)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            cached_label, cached_reason, cached_raw = hit
            return JudgeResult(cached_label, int(cached_label == "CORRECT"), None, 0, cached=True,
                               reason=cached_reason, raw=cached_raw)
        messages = build_judge_messages(question, gold, prediction, self.template)
        calls, last_error, raw = 0, "no attempt made", ""
        while calls < MAX_ATTEMPTS:
            calls += 1
            json_mode = self._json_mode
            try:
                raw = _content_text(self._runnable(json_mode).invoke(messages))
            except (
                Exception
            ) as exc:  # a failed call is a failed attempt; the item gets judge_error at the end
                last_error = f"{type(exc).__name__}: {exc}"
                if json_mode and _looks_unsupported(exc):
                    with self._lock:  # this backend rejects JSON mode: stop asking for it
                        self._json_mode = False
                continue
            label, reason = parse_judge_reply(raw)
            if label is not None:
                if self.cache is not None:
                    self.cache.put(key, label, reason, raw, self.model_name, self.prompt_version)
                return JudgeResult(label, int(label == "CORRECT"), None, calls, reason=reason, raw=raw)
            last_error = f"unreadable judge reply: {raw[:200]!r}"
        return JudgeResult(None, 0, f"after {calls} attempts: {last_error}", calls, raw=raw)
