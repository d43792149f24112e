"""Settings from the environment, and the runtime `Context` every graph receives.

`Settings` is read once per process from `RECOLLECT_*` environment variables (pydantic-settings).
`Context` is the LangGraph `context_schema`: plain, JSON-friendly fields whose defaults come from
`Settings`, so the CLI, the HTTP server, Studio and tests can all override any of them per run.
Method hyper-parameters carry their method prefix (`memr3_`, `mra_`, `hymem_`, `mg_`) and the
defaults of the method specs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

StructuredMethod = Literal["auto", "json_schema", "json_object_schema", "json_mode", "function_calling"]
ToolProtocol = Literal["auto", "native", "json"]


def _default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "recollect")


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "recollect")


class Settings(BaseSettings):
    """Process-wide settings. Every field can be set as `RECOLLECT_<NAME>` in the environment."""

    model_config = SettingsConfigDict(env_prefix="RECOLLECT_", extra="ignore")

    data_dir: str = Field(default_factory=_default_data_dir)
    cache_dir: str = Field(default_factory=_default_cache_dir)

    # An OpenAI-compatible endpoint. Empty base URL = the embedded llama.cpp model.
    llm_base_url: str = ""
    llm_api_key: str = ""
    llm_model: str = ""
    llm_temperature: float = 0.0
    llm_timeout_s: float = 600.0
    llm_max_retries: int = 2
    llm_structured_method: StructuredMethod = "auto"
    llm_max_prompt_tokens: int = 3000
    # Default completion cap per call: a grammar-constrained JSON reply can otherwise run on
    # (whitespace) until the context is full, which costs many minutes on the CPU model.
    llm_max_tokens: int = 1024
    # Auxiliary endpoint (MGRetrieval's keyword model). Empty = the main endpoint.
    aux_llm_base_url: str = ""
    aux_llm_api_key: str = ""
    aux_llm_model: str = ""
    # The eval's LLM judge when `--judge MODEL` names a model: its endpoint (empty = OpenAI's) and key
    # (empty = OPENAI_API_KEY). `--judge local` uses the backbone's endpoint instead.
    judge_base_url: str = ""
    judge_api_key: str = ""

    # The embedded model: "1.5b" (default) or "0.5b" (smoke checks only; weak decisions).
    local_model: Literal["1.5b", "0.5b"] = "1.5b"
    local_n_ctx: int = 8192
    local_threads: int = 2


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def _s(name: str) -> Any:
    return field(default_factory=lambda: getattr(get_settings(), name))


@dataclass(kw_only=True)
class Context:
    """Runtime settings for one graph run (LangGraph `context_schema`)."""

    data_dir: str = _s("data_dir")
    # The namespace read when a run's input names none: Studio's chat view sends only `messages`.
    namespace: str = ""
    max_prompt_tokens: int = _s("llm_max_prompt_tokens")
    structured_method: StructuredMethod = _s("llm_structured_method")
    # Injected chat models (tests, applications). None = built from Settings.
    chat_model: Any = field(default=None, repr=False, compare=False)
    aux_chat_model: Any = field(default=None, repr=False, compare=False)
    # Any LangChain BaseRetriever whose documents carry stable ids (MemR3 and rag only).
    retriever: Any = field(default=None, repr=False, compare=False)

    # MemR3 (specs/methods/memr3.md §5)
    memr3_max_iterations: int = 5
    memr3_max_reflect_streak: int = 1
    memr3_max_retrieval_attempts: int = 0  # 0 = same as memr3_max_iterations
    memr3_top_k: int = 5
    memr3_candidate_k: int = 20
    memr3_chunk_tokens: int = 256
    memr3_rerank: Literal["none", "hybrid"] = "hybrid"
    # Improvement (spec: the answer call sees the evidence bullets and the draft only, = "never"): also
    # show it the conversation turns behind them: the latest retrieval's snippets plus the turns the
    # evidence cites. "when_thin" only when the evidence cites no shown turn or the router fell back.
    # Default "always": the first retrieval is RAG's, so the answer call then sees at least what RAG's
    # does (evidence-only measured 0.0 F1 against RAG's 0.33 on the memr3_vs_rag slice).
    memr3_answer_snippets: Literal["never", "when_thin", "always"] = "always"
    # Improvement (spec: the router's evidence list replaces the old one wholesale): bullets citing a
    # shown turn that the router dropped are carried over (at most 6), so multi-hop facts found in an
    # earlier iteration reach the answer call. False = the spec's wholesale replacement.
    memr3_keep_cited_evidence: bool = True
    # Improvement (spec: the answer call's reply is final): when the answer call says "No information
    # available" but the router's draft answer is grounded (its words occur in the shown turns or
    # evidence), the draft is the answer. False = the spec.
    memr3_prefer_grounded_draft: bool = True

    # Baselines
    rag_top_k: int = 5
    full_context_max_tokens: int = 6000  # the local model has an 8k window; keep the newest turns that fit

    # MRAgent (specs/methods/mragent.md §5)
    mra_max_rounds: int = 8
    mra_max_calls_per_round: int = 10
    mra_max_calls_total: int = 50
    mra_k1: int = 80
    mra_k2: int = 20
    mra_tag_max: int = 15
    mra_tag_keep: int = 10
    mra_tag_expand_threshold: float = 0.7
    mra_time_event_limit: int = 50
    mra_topic_k: int = 8
    mra_tool_event_cap: int = 20
    mra_jaccard: float = 0.6
    mra_preselect: Literal["llm_union", "llm_pick", "embedding"] = "llm_union"
    mra_ingest_window_tokens: int = 1200
    mra_use_category_hints: bool = False
    mra_tool_protocol: ToolProtocol = "auto"
    # Improvement (spec: unknown ids are dropped): a cue reply that names a turn ("D1:3") instead of its
    # sentence ids ("D1:3-1") is read as covering that turn's sentences; the verbatim check still applies.
    # On the dev-split cost slice it saved 18 of 18 sentences of one session from the token fallback.
    mra_cues_accept_turn_ids: bool = True

    # HyMem (specs/methods/hymem.md §5)
    hymem_light_k: int = 10
    hymem_deep_n: int = 30
    hymem_deep_batch: int = 50
    hymem_parallel_batches: bool = True
    hymem_max_rounds: int = 2
    hymem_deep_max_sessions: int = 3
    hymem_deep_fallback_k: int = 5
    # Improvement (spec: any non-empty list of items is a summary): a session needs at least one Level-1
    # item per this many turns (a 20-turn session: 5), else the summary call is retried once with that
    # instruction; one item per session makes light show everything and deep selection meaningless.
    # 0 = the spec (no density check).
    hymem_turns_per_summary: int = 4
    # Improvement (spec: light supports are every turn linked from the k shown summaries): the light
    # call cites the summary ids it used and its supports are their turns. "all_shown" = the spec.
    hymem_light_supports: Literal["cited", "all_shown"] = "cited"
    # Improvement (spec: light answers "completely", deep lists every plausible answer): ask both for a
    # short phrase copied from the memory, as the baselines do; long free-form answers lower token F1
    # and the 1.5B model mixes people up in them. "full" = the spec's wording.
    hymem_answer_style: Literal["short", "full"] = "short"

    # MGRetrieval (specs/methods/mgretrieval.md §5)
    mg_depth: int = 4
    mg_max_rounds: int = 4
    mg_max_new_per_round: int = 20
    mg_max_critical: int = 10
    mg_keywords_per_memory: int = 8
    mg_match_shortlist: int = 5
    mg_match_min_sim: float = 0.6
    mg_select_candidates: int = 50
    mg_empty_fallback: Literal["dense", "none"] = "dense"
    mg_rewrite_with_question: bool = True
    mg_keep_surface_forms: bool = False

    def with_overrides(self, **overrides: Any) -> Context:
        """A copy with some fields replaced; unknown names raise a clear error."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown context setting(s): {', '.join(unknown)}")
        return replace(self, **overrides)

    @property
    def memr3_retrieval_budget(self) -> int:
        return self.memr3_max_retrieval_attempts or self.memr3_max_iterations


def context_setting_names() -> list[str]:
    return [f.name for f in fields(Context) if f.name not in {"chat_model", "aux_chat_model", "retriever"}]
