"""What a memory builder reports, and the progress bar it iterates with.

Every method's builder (graphs/<method>/memory.py, recollect.memory.chunks) has the signature
`build(ws, namespace, conversation, ctx, progress) -> BuildReport`; it must be idempotent (content
hashes and the LLM cache make a second run free) and incremental (new sessions extend what exists).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from tqdm import tqdm

X = TypeVar("X")
Progress = Callable[[Iterable[X], str], Iterable[X]]

@dataclass
class BuildReport:
    method: str
    sessions: int = 0
    llm_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    # the server's own seconds computing prompts and generating replies (llama.cpp's timings; 0 elsewhere)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    embedded: int = 0
    seconds: float = 0.0
    fallbacks: list[str] = field(default_factory=list)

    def add_usage(self, usage: dict[str, Any]) -> None:
        self.llm_calls += int(usage.get("calls", 0))
        self.prompt_tokens += int(usage.get("prompt_tokens", 0))
        self.completion_tokens += int(usage.get("completion_tokens", 0))
        self.cached_tokens += int(usage.get("cached_tokens", 0))
        self.prefill_s = round(self.prefill_s + float(usage.get("prefill_s", 0.0)), 3)
        self.decode_s = round(self.decode_s + float(usage.get("decode_s", 0.0)), 3)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def tqdm_progress(show: bool) -> Progress:
    def wrap(items: Iterable[X], desc: str) -> Iterable[X]:
        return tqdm(items, desc=desc, disable=not show, unit="session", leave=True)

    return wrap


