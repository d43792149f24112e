"""Settings from the environment, and the runtime `Context` every graph receives.

`Settings` is read once per process from `RECOLLECT_*` environment variables (pydantic-settings).
`Context` is the LangGraph `context_schema`: plain, JSON-friendly fields whose defaults come from
`Settings`, so the CLI, the HTTP server, Studio and tests can all override any of them per run.
Method hyper-parameters carry their method prefix (`memr3_`, `mra_`, `hymem_`, `mg_`) and the
defaults of the method specs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, replace
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, TypeAdapter, ValidationError
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
    # Which llama.cpp server runs the embedded model. "xllamacpp" (default): llama.cpp's own C++ server from
    # a prebuilt PyPI wheel, with a host-memory prompt cache. "llama-cpp-python": the earlier runtime,
    # compiled from source at setup (about 9 minutes on 2 cores); kept so benchmarks can measure both.
    local_runtime: Literal["xllamacpp", "llama-cpp-python"] = "xllamacpp"
    # Server slots (requests decoded together) and the host-memory prompt cache of the xllamacpp server.
    local_parallel: int = Field(default=1, ge=1, le=16)
    local_cache_ram_mib: int = Field(default=2048, ge=0)
    # JSON whitespace on the xllamacpp server. Its schema grammar lets a reply put any whitespace between
    # JSON tokens, and the model writes indented multi-line JSON, which the compiled llama-cpp-python
    # runtime's grammar never allowed (MemR3 on the dev slice: 40.30 LoCoMo-F1 there, 32.67 on xllamacpp).
    # The other values send the schema as an llguidance grammar: "compact" with fixed separators
    # (`{"a": 1, "b": [2]}`), "single_space" with at most one space between tokens (the old runtime's
    # grammar). Neither brought MemR3 back: on its first dev questions its router retrieved far more
    # (compact: 4-7 calls instead of 2-6 and 2-4x the generated tokens; single_space: 7-8 calls and
    # 1,458-2,325 tokens against 2 calls and 123-291), so "flexible" (the server's own grammar) is the default.
    local_json_whitespace: Literal["flexible", "compact", "single_space"] = "flexible"
    # CPU instruction set for the compiled llama-cpp-python runtime: "auto" = AVX-512 when /proc/cpuinfo
    # reports avx512f/bw/vl, else AVX2; never the native build (it emits AMX and dies with SIGILL here).
    local_cpu_flags: Literal["auto", "avx512", "avx2"] = "auto"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def _s(name: str) -> Any:
    return field(default_factory=lambda: getattr(get_settings(), name))


class ContextError(ValueError):
    """A runtime setting has the wrong type or is out of range; the message names the setting."""


def setting(default: Any = None, description: str = "", *, env: str | None = None, ge: float | None = None,
            le: float | None = None, pattern: str | None = None) -> Any:
    """A `Context` field with the description Studio shows and the range `Context` enforces.

    `env` names the `Settings` field the default comes from (read when a Context is made).
    """
    limits = {"ge": ge, "le": le, "pattern": pattern}
    metadata = {"description": description} | {k: v for k, v in limits.items() if v is not None}
    if env is not None:
        return field(default_factory=lambda: getattr(get_settings(), env), metadata=metadata)
    return field(default=default, metadata=metadata)


@cache
def _checkers() -> dict[str, tuple[TypeAdapter, float | None, float | None, str | None]]:
    import typing

    hints = typing.get_type_hints(Context)
    out = {}
    for f in fields(Context):
        if hints[f.name] is Any:
            continue
        out[f.name] = (TypeAdapter(hints[f.name]), f.metadata.get("ge"), f.metadata.get("le"),
                       f.metadata.get("pattern"))
    return out


def _check_setting(name: str, value: Any) -> Any:
    """`value` converted to the setting's type (JSON-ish strings and numbers are accepted), else ContextError."""
    adapter, ge, le, pattern = _checkers()[name]
    if isinstance(value, bool) and adapter.core_schema.get("type") in ("int", "float"):
        raise ContextError(f"setting {name}: expected a number, got {value!r}")
    try:
        out = adapter.validate_python(value)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"] if exc.errors() else str(exc)
        raise ContextError(f"setting {name}: {reason[:1].lower() + reason[1:]}, got {value!r}") from None
    if ge is not None and out < ge:
        raise ContextError(f"setting {name}: must be at least {ge:g}, got {value!r}")
    if le is not None and out > le:
        raise ContextError(f"setting {name}: must be at most {le:g}, got {value!r}")
    if pattern is not None and not re.fullmatch(pattern, out):
        raise ContextError(f"setting {name}: must match {pattern}, got {value!r}")
    return out


@dataclass(kw_only=True)
class Context:
    """Runtime settings for one graph run (LangGraph `context_schema`)."""

    data_dir: str = setting(
        env="data_dir", description="Data directory holding the namespaces, vectors, caches and checkpoints")
    namespace: str = setting(
        "", "Namespace read when a run's input names none (Studio's chat view sends only messages)",
        pattern=r"(|[A-Za-z0-9]([A-Za-z0-9_-]{0,60}[A-Za-z0-9])?)")
    max_prompt_tokens: int = setting(
        env="llm_max_prompt_tokens", description="Token budget of one prompt's memory section", ge=1)
    structured_method: StructuredMethod = setting(
        env="llm_structured_method", description="How replies are bound to their JSON schema (auto: by endpoint)")
    # Every graph's prompt asks for absolute dates, and the 1.5B model often keeps the speaker's "next
    # month" or writes "2023-05-25". True: the last step of every graph (finish_question) rewrites them
    # deterministically against the session date of the turn that says them (app/answer_dates.py),
    # and the trace's `absolute_dates` record shows each change. False = the model's answer as it is.
    answer_absolute_dates: bool = setting(
        True, "Every graph: write relative times and ISO dates in the answer as absolute dates, against "
              "the date of the turn that says them (false = the model's answer unchanged)")
    # The span rewrite (MGRetrieval's last call; MRAgent's with `mra_answer_rewrite`) asks the model to work
    # out absolute dates, and the 1.5B model often writes the memory's own date instead ("next month" said
    # on 25 May 2023 became "25 May 2023"). With the date step on, true has it copy the time as said, and
    # the date step resolves it. False = the spec's rule and worked example.
    rewrite_dates_as_said: bool = setting(
        True, "Span rewrite: copy times as said and let the date step (answer_absolute_dates) date them, "
              "instead of having the model work dates out (false = spec)")
    # Injected chat models (tests, applications). None = built from Settings.
    chat_model: Any = field(default=None, repr=False, compare=False, metadata={
        "description": "Injected chat model (Python only); None = the configured endpoint"})
    aux_chat_model: Any = field(default=None, repr=False, compare=False, metadata={
        "description": "Injected auxiliary chat model (Python only); None = the main model"})
    # Any LangChain BaseRetriever whose documents carry stable ids (MemR3 and rag only).
    retriever: Any = field(default=None, repr=False, compare=False, metadata={
        "description": "Injected LangChain retriever with stable document ids (Python only; MemR3 and rag)"})

    # MemR3 (specs/methods/memr3.md §5)
    memr3_max_iterations: int = setting(5, "MemR3: router calls per question (n_max)", ge=1, le=50)
    memr3_max_reflect_streak: int = setting(
        1, "MemR3: reflect decisions in a row before retrieval is forced (n_cap)", ge=0)
    memr3_max_retrieval_attempts: int = setting(
        0, "MemR3: retrievals per question; 0 = same as memr3_max_iterations", ge=0)
    memr3_top_k: int = setting(5, "MemR3: chunks shown per retrieval", ge=1)
    memr3_candidate_k: int = setting(20, "MemR3: candidate pool before reranking", ge=1)
    memr3_chunk_tokens: int = setting(
        256, "MemR3: chunk size in tokens (turn-aligned, within a session); set at ingest", ge=1)
    memr3_rerank: Literal["none", "hybrid"] = setting(
        "hybrid", "MemR3: rerank candidates with BM25 + dense fusion (hybrid) or not (none)")
    # Improvement (spec: the answer call sees the evidence bullets and the draft only, = "never"): also
    # show it the conversation turns behind them: the latest retrieval's snippets plus the turns the
    # evidence cites. "when_thin" only when the evidence cites no shown turn or the router fell back.
    # Default "always": the first retrieval is RAG's, so the answer call then sees at least what RAG's
    # does (evidence-only measured 0.0 F1 against RAG's 0.33 on the memr3_vs_rag slice).
    memr3_answer_snippets: Literal["never", "when_thin", "always"] = setting(
        "always", "MemR3: show the answer call the turns behind the evidence (never = the spec)")
    # Improvement (spec: the router's evidence list replaces the old one wholesale): bullets citing a
    # shown turn that the router dropped are carried over (at most 6), so multi-hop facts found in an
    # earlier iteration reach the answer call. False = the spec's wholesale replacement.
    memr3_keep_cited_evidence: bool = setting(
        True, "MemR3: carry over evidence bullets citing a shown turn that the router dropped")
    # Improvement (spec: the answer call's reply is final): when the answer call says "No information
    # available" but the router's draft answer is grounded (its words occur in the shown turns or
    # evidence), the draft is the answer. False = the spec.
    memr3_prefer_grounded_draft: bool = setting(
        True, "MemR3: use the router's grounded draft when the answer call finds nothing")
    # Improvement (spec: the answer call's reply is final): one more call rewrites the answer into a short
    # span with absolute dates (graphs/answer_rewrite.py, as MRAgent's `mra_answer_rewrite`). The 1.5B
    # model's MemR3 answers keep relative times and ISO dates ("last week", "2023-05-25"), which
    # LoCoMo-F1 scores 0 against "9 June, 2023". Measured on the dev slice: 32.66 -> 34.01 LoCoMo-F1, but
    # only 2 of 16 answers changed, both by copying the rewrite prompt's example, so the default stays off
    # (benchmarks/reports/eval_dev_memr3_rewrite/).
    memr3_answer_rewrite: bool = setting(
        False, "MemR3: rewrite the answer into a short span with one more call (false = spec)")

    # Baselines
    rag_top_k: int = setting(5, "rag baseline: chunks retrieved for the question", ge=1)
    # the local model has an 8k window; keep the newest turns that fit
    full_context_max_tokens: int = setting(
        6000, "full_context baseline: prompt budget; the newest turns that fit are shown", ge=1)

    # MRAgent (specs/methods/mragent.md §5)
    mra_max_rounds: int = setting(
        8, "MRAgent: LLM rounds in the tool loop, the forced final one included", ge=1, le=50)
    mra_max_calls_per_round: int = setting(10, "MRAgent: tool calls executed per round", ge=1)
    mra_max_calls_total: int = setting(50, "MRAgent: tool calls per question", ge=1)
    mra_k1: int = setting(80, "MRAgent: coarse candidate cap (K1)", ge=1)
    mra_k2: int = setting(20, "MRAgent: fine candidate cap (K2)", ge=1)
    mra_tag_max: int = setting(15, "MRAgent: tags considered per cue expansion", ge=1)
    mra_tag_keep: int = setting(10, "MRAgent: tags kept after scoring", ge=1)
    mra_tag_expand_threshold: float = setting(0.7, "MRAgent: tag score needed to expand a tag", ge=0, le=1)
    mra_time_event_limit: int = setting(50, "MRAgent: events returned by a time-window lookup", ge=1)
    mra_topic_k: int = setting(8, "MRAgent: topics returned by a topic search", ge=1)
    mra_tool_event_cap: int = setting(20, "MRAgent: events returned by one tag or topic tool call", ge=1)
    mra_jaccard: float = setting(0.6, "MRAgent: Jaccard similarity for a partial cue match", ge=0, le=1)
    mra_preselect: Literal["llm_union", "llm_pick", "embedding"] = setting(
        "llm_union", "MRAgent: how seed events are preselected")
    mra_ingest_window_tokens: int = setting(
        1200, "MRAgent: tokens per ingestion window (cue extraction); set at ingest", ge=1)
    mra_tool_protocol: ToolProtocol = setting(
        "auto", "MRAgent: native tool calls, a JSON protocol, or auto by endpoint")
    # Improvement (spec: unknown ids are dropped): a cue reply that names a turn ("D1:3") instead of its
    # sentence ids ("D1:3-1") is read as covering that turn's sentences; the verbatim check still applies.
    # On the dev-split cost slice it saved 18 of 18 sentences of one session from the token fallback.
    mra_cues_accept_turn_ids: bool = setting(
        True, "MRAgent: a cue reply naming a turn id covers that turn's sentences")
    # --- mra_ingest_format (issue 12: fewer generated tokens at ingestion; app/ingest/mragent.py)
    # "json" is the spec's keyed replies, kept so a benchmark can restore the old path. "compact" asks
    # for positional arrays with local numbers and "" for the session date (same memory, about 40%
    # fewer generated tokens; docs/mragent.md). "compact_merged" also writes each sentence's cues in
    # the rewrite call: one call per window instead of two. Changing it re-ingests (new cache keys).
    mra_ingest_format: Literal["compact", "compact_merged", "json"] = setting(
        "compact", "MRAgent: ingestion reply format: compact arrays (compact), compact with the cues in the "
                   "rewrite call, one call per window (compact_merged), or the spec's keyed JSON (json); "
                   "set at ingest")
    # --- end mra_ingest_format
    # Improvement (spec: call B, an LLM cue extraction per window): "lexical" skips call B and takes each
    # sentence's content words (no stopwords, at least 3 characters, at most 30) as its cues, plus the
    # speaker. The 1.5B model's call B copied nearly every word of each sentence, "the" and "you"
    # included, and was about a third of MRAgent's generated tokens at ingestion; the measured effect is
    # in docs/mragent.md. "llm" = the spec. Ignored by compact_merged, whose cues come with call A.
    mra_ingest_cues: Literal["lexical", "llm"] = setting(
        "lexical", "MRAgent: cues from each sentence's content words, no call (lexical), or the spec's cue "
                   "extraction call per window (llm); set at ingest")
    # Improvement (spec: the navigate or forced answer is final): one more call rewrites the answer into a
    # short span with absolute dates, the rewrite MGRetrieval's spec ends with (graphs/answer_rewrite.py).
    # The 1.5B model answers MRAgent's questions in full sentences ("Caroline went to the group on May 8,
    # 2023."), which LoCoMo-F1 scores near zero; the measured effect is in docs/mragent.md.
    mra_answer_rewrite: bool = setting(
        True, "MRAgent: rewrite the answer into a short span with one more call (false = spec)")

    # HyMem (specs/methods/hymem.md §5)
    hymem_light_k: int = setting(10, "HyMem: summaries shown to the light answer", ge=1)
    hymem_deep_n: int = setting(30, "HyMem: raw turns considered by the deep path", ge=1)
    hymem_deep_batch: int = setting(50, "HyMem: turns per deep selection batch (d)", ge=1)
    hymem_parallel_batches: bool = setting(True, "HyMem: run deep selection batches in parallel")
    hymem_max_rounds: int = setting(2, "HyMem: reflect rounds (T)", ge=1, le=20)
    hymem_deep_max_sessions: int = setting(3, "HyMem: sessions the deep path may open", ge=1)
    hymem_deep_fallback_k: int = setting(5, "HyMem: dense hits used when deep selection picks nothing", ge=0)
    # Improvement (spec: any non-empty list of items is a summary): a session needs at least one Level-1
    # item per this many turns (a 20-turn session: 5), else the summary call is retried once with that
    # instruction; one item per session makes light show everything and deep selection meaningless.
    # Turns no item links to are added as their own turn-line item (probe: the 1.5B model summarised the
    # first 6 of 16 turns twice). 0 = the spec (no density check, no added turn lines).
    hymem_turns_per_summary: int = setting(
        4, "HyMem: turns per required summary item at ingest; 0 = no density check", ge=0)
    # Improvement (spec: an item links whatever turns the model lists): one sentence cannot carry a whole
    # session, yet the 1.5B model at times lists every turn id of a session for a one-line gist ("Jon and
    # Gina are discussing their plans"), which marks the whole session as summarised, so none of its turns
    # is added as a turn line and only the gist is searchable (dev slice: an item listed 12-23 turns in 4 of
    # 6 sessions on the xllamacpp runtime, 3 of them left with one searchable line; 1 of 6 on
    # llama-cpp-python). An item keeps at most this many of the turns it lists, those most similar to its
    # text; the others are then linked by no item and get their own turn line. 0 = the spec (no cap).
    hymem_max_turns_per_item: int = setting(
        8, "HyMem: turns one summary item may link at ingest (most similar kept); 0 = no cap", ge=0)
    # Improvement (spec: light supports are every turn linked from the k shown summaries): the light
    # call cites the summary ids it used and its supports are their turns. "all_shown" = the spec.
    hymem_light_supports: Literal["cited", "all_shown"] = setting(
        "cited", "HyMem: light supports are the cited summaries' turns or every shown one")
    # Improvement (spec: a light answer judged sufficient is final): a Level-1 summary written by a small
    # model can misattribute or invent a fact, so a light answer must also be found in the raw turns its
    # cited summaries link to (their text and date, not the speaker label: "Theo" read off a summary of
    # Theo's question is not grounded); otherwise the round escalates to deep, which reads the sessions.
    # false = the spec.
    hymem_light_grounding: bool = setting(
        True, "HyMem: escalate to deep when a light answer is not found in the turns of its summaries")
    # Improvement (spec: light answers "completely", deep lists every plausible answer): ask both for a
    # short phrase copied from the memory, as the baselines do; long free-form answers lower token F1
    # and the 1.5B model mixes people up in them. "full" = the spec's wording.
    hymem_answer_style: Literal["short", "full"] = setting(
        "short", "HyMem: short copied phrase or the spec's full answer")

    # MGRetrieval (specs/methods/mgretrieval.md §5)
    mg_depth: int = setting(4, "MGRetrieval: pyramid levels (maximum query keywords)", ge=1, le=10)
    mg_max_rounds: int = setting(4, "MGRetrieval: retrieval rounds", ge=1, le=20)
    mg_max_new_per_round: int = setting(20, "MGRetrieval: new memories added per round", ge=1)
    mg_max_critical: int = setting(10, "MGRetrieval: critical memories kept for the answer", ge=1)
    mg_keywords_per_memory: int = setting(8, "MGRetrieval: keywords extracted per memory at ingest", ge=1)
    mg_match_shortlist: int = setting(5, "MGRetrieval: vocabulary entries shortlisted per query keyword", ge=1)
    mg_match_min_sim: float = setting(0.6, "MGRetrieval: cosine similarity a vocabulary match needs", ge=-1, le=1)
    mg_select_candidates: int = setting(50, "MGRetrieval: vocabulary candidates shown to keyword selection", ge=1)
    mg_empty_fallback: Literal["dense", "none"] = setting(
        "dense", "MGRetrieval: dense retrieval when no keyword group matches (dense) or nothing")
    mg_rewrite_with_question: bool = setting(True, "MGRetrieval: the rewrite call also sees the question")
    mg_keep_surface_forms: bool = setting(
        False, "MGRetrieval: keep keywords' surface forms instead of normalising them")
    # --- mg_ingest_format (issue 12) ---
    # Improvement (spec: keyed JSON replies at ingestion): "compact" asks for {turn number: keywords} and
    # {candidate number: entry number}, no repeated keys and no echoed keyword text (decode dominates the
    # CPU model's ingestion time); "json" = the spec's keyed objects. Both shapes are parsed in either mode.
    mg_ingest_format: Literal["compact", "json"] = setting(
        "compact", "MGRetrieval: ingestion reply format (compact: numbered keys and entry numbers; json: the spec's keyed objects)")
    # --- end mg_ingest_format ---
    # Improvement (spec: the paper's pyramid order): a group of speaker names only (Φ ≈ half the
    # conversation) turns its round into dense top-k retrieval over that speaker's turns; "last" visits
    # such groups after every other group, "in_order" is the spec.
    mg_speaker_only_groups: Literal["last", "in_order"] = setting(
        "last", "MGRetrieval: where keyword groups made only of speaker names go in the pyramid (in_order = spec)")
    # --- MGRetrieval retrieval-round improvements (docs/mgretrieval.md, "Retrieval rounds"); each
    # deviates from the spec, whose behaviour is one value away. The 1.5B model called round 1
    # sufficient on thin evidence every time, and narrow keyword groups showed ~9 turns.
    mg_assess_grounding: bool = setting(
        True, "MGRetrieval: accept 'sufficient' only when the draft answer is found in the memories shown "
              "(H and this round's new ones); a 'no information' draft is never sufficient (false = spec)")
    mg_dense_fill: int = setting(
        10, "MGRetrieval: top a keyword group with fewer new memories up to this many with the question's "
            "nearest unmasked turns, within mg_max_new_per_round (0 = spec)", ge=0)
    mg_exhausted_fallback: Literal["dense", "stop"] = setting(
        "dense", "MGRetrieval: when the pyramid runs out before the round budget, go on with rounds of the "
                 "question's nearest unmasked turns (dense) or stop (stop = spec)")
    mg_keep_critical_when_none: bool = setting(
        True, "MGRetrieval: a reply naming no shown memory keeps H(r-1) and the new memories, cut by "
              "similarity, instead of an empty H (false = spec)")
    mg_rewrite_keep_draft: bool = setting(
        True, "MGRetrieval: keep the draft when the rewrite says 'no information' but the draft answers "
              "(false = spec)")
    # --- end of the MGRetrieval retrieval-round improvements

    def __post_init__(self) -> None:
        # Every way in (CLI --set, the SDK's `context`, Python) builds a Context, so one check here
        # turns a bad value into one clear error naming the setting instead of a failure deep in a node.
        for name in _checkers():
            object.__setattr__(self, name, _check_setting(name, getattr(self, name)))

    def with_overrides(self, **overrides: Any) -> Context:
        """A copy with some fields replaced; unknown names raise a clear error."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ContextError(f"unknown context setting(s): {', '.join(unknown)}")
        return replace(self, **overrides)

    @property
    def memr3_retrieval_budget(self) -> int:
        return self.memr3_max_retrieval_attempts or self.memr3_max_iterations


def context_setting_names() -> list[str]:
    return [f.name for f in fields(Context) if f.name not in {"chat_model", "aux_chat_model", "retriever"}]
