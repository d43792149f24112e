"""Settings from the environment, and the shared core of every graph's runtime `Context`.

`Settings` is read once per process from `RECOLLECT_*` environment variables (pydantic-settings).
`Context` is the part of LangGraph's `context_schema` that every graph shares: plain, JSON-friendly
fields whose defaults come from `Settings`, so the CLI, the HTTP server, Studio and tests can all
override any of them per run; `SERVER_ONLY` ones (the data directory) only from the CLI and Python: the
server's clients never set them, and they are left out of the schema those clients see. Each method adds
its own settings in `graphs/<method>/settings.py` (`MemR3Context(MemR3Settings, Context)`, ...), so a
graph's Studio panel lists the shared settings and its own, nothing else. Method settings carry their
method prefix (`memr3_`, `mra_`, `hymem_`, `mg_`).

Profiles: a method setting declared with `paper=` has two defaults. `profile="tuned"` (the default)
takes ours; `profile="paper"` takes the value that reproduces the paper's published behaviour. A
value set explicitly always wins over either profile.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

from pydantic import Field, TypeAdapter, ValidationError
from pydantic.json_schema import SkipJsonSchema
from pydantic_settings import BaseSettings, SettingsConfigDict

from recollect.namespace_ids import namespace_problem

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
    # Where the data directory's documents (memories, turn texts, registry, LLM cache) live: "langgraph" (the
    # default) as items of LangGraph's SQLite store in store.sqlite (recollect.memory.store_docs), which the
    # server's store API and Studio list, and which copies an existing recollect.db in once; "recollect_db" is
    # the earlier private file, kept for data directories that other tools read directly.
    doc_store: Literal["recollect_db", "langgraph"] = "langgraph"
    # A libpq URI (postgresql://user:pass@host/db). Set, documents go to LangGraph's Postgres store in that
    # database instead of store.sqlite (so it implies doc_store=langgraph, and recollect_db with it is an
    # error), and checkpoints to its Postgres saver instead of checkpoints.sqlite: processes on several
    # machines then share one memory (recollect.memory.backends). Vectors stay where chroma_url says. Needs
    # the `postgres` extra.
    postgres_uri: str = ""
    # Vectors on a Chroma server (`http[s]://host[:port]`, e.g. http://127.0.0.1:8000) instead of the embedded
    # Chroma in <data_dir>/chroma, so several machines can share them; the token goes as Chroma's token auth.
    chroma_url: str = ""
    chroma_token: str = ""

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
    # CPU instruction set of the llama.cpp runtime: "auto" = on a CPU whose /proc/cpuinfo reports AVX-512,
    # `recollect setup` compiles xllamacpp once for it (AVX-512 + VNNI/VBMI/BF16 where present, cached in
    # ~/.cache/recollect/wheels; measured 1.27x prefill, 1.21x decode: benchmarks/reports/runtime_speed.md)
    # and falls back to the prebuilt AVX2 wheel if the build fails; "avx2" = always the prebuilt wheel.
    # Never a `-march=native` build: it emits AMX and dies with SIGILL on these machines.
    local_cpu_flags: Literal["auto", "avx512", "avx2"] = "auto"

    # `recollect serve`: a JSON file mapping API keys to a user and the namespaces it may use (empty = no
    # auth, allowed on a loopback host only), and the largest dialogue its `ingest` graph takes in one run.
    auth_file: str = ""
    ingest_max_bytes: int = Field(default=5 * 1024 * 1024, ge=1)
    # Named endpoints a run may choose with the `model` setting: JSON {"<name>": {"base_url": ..., "model": ...,
    # "api_key_env": ...}}. A key stays in the server's environment: an entry names the variable holding it.
    models: str = ""


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def _s(name: str) -> Any:
    return field(default_factory=lambda: getattr(get_settings(), name))


class ContextError(ValueError):
    """A runtime setting has the wrong type or is out of range; the message names the setting."""


_NO_PAPER = object()


def setting(default: Any = None, description: str = "", *, env: str | None = None, ge: float | None = None,
            le: float | None = None, pattern: str | None = None, check: Callable[[Any], str | None] | None = None,
            paper: Any = _NO_PAPER) -> Any:
    """A `Context` field with the description Studio shows and the range `Context` enforces.

    `env` names the `Settings` field the default comes from (read when a Context is made). `check` returns
    why a value is invalid, or None. `paper` is the value that reproduces the paper, where ours differs:
    `profile="paper"` uses it.
    """
    limits = {"ge": ge, "le": le, "pattern": pattern, "check": check}
    metadata = {"description": description} | {k: v for k, v in limits.items() if v is not None}
    if paper is not _NO_PAPER:
        metadata["paper"] = paper
        metadata["description"] = f"{description} (paper: {json.dumps(paper)})"
    if env is not None:
        return field(default_factory=lambda: getattr(get_settings(), env), metadata=metadata)
    return field(default=default, metadata=metadata)


@cache
def _checkers(cls: type) -> dict[str, tuple[TypeAdapter, float | None, float | None, str | None, Any]]:
    import typing

    hints = typing.get_type_hints(cls)
    out: dict[str, tuple[TypeAdapter, float | None, float | None, str | None, Any]] = {}
    for f in fields(cls):
        if hints[f.name] is Any:
            continue
        out[f.name] = (TypeAdapter(hints[f.name]), f.metadata.get("ge"), f.metadata.get("le"),
                       f.metadata.get("pattern"), f.metadata.get("check"))
    return out


def _check_setting(cls: type, name: str, value: Any) -> Any:
    """`value` converted to the setting's type (JSON-ish strings and numbers are accepted), else ContextError."""
    adapter, ge, le, pattern, check = _checkers(cls)[name]
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
    problem = check(out) if check is not None else None
    if problem is not None:
        raise ContextError(f"setting {name}: {problem}, got {value!r}")
    return out


@dataclass(kw_only=True)
class Context:
    """Settings every graph shares (the core of each graph's LangGraph `context_schema`)."""

    profile: Literal["tuned", "paper"] = setting(
        "tuned", "Defaults of the method settings: ours (tuned) or the values that reproduce each paper (paper); "
                 "a setting given explicitly wins over both")

    # Server configuration (RECOLLECT_DATA_DIR, `--data-dir`): left out of the schema a client sees, so a
    # client never picks where the server reads and writes (recollect.service.auth rejects it if sent).
    data_dir: SkipJsonSchema[str] = setting(
        env="data_dir", description="Data directory holding the namespaces, vectors, caches and checkpoints")
    # Any valid namespace id (`a@b.com`, `auth0|123`: recollect.namespace_ids), or "" for none.
    namespace: str = setting(
        "", "Namespace read when a run's input names none (Studio's chat view sends only messages)",
        check=lambda value: namespace_problem(value) if value else None)
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
              "the date of the turn that says them (false = the model's answer unchanged)", paper=False)
    # The span rewrite (MGRetrieval's last call; MRAgent's with `mra_answer_rewrite`) asks the model to work
    # out absolute dates, and the 1.5B model often writes the memory's own date instead ("next month" said
    # on 25 May 2023 became "25 May 2023"). With the date step on, true has it copy the time as said, and
    # the date step resolves it. False = the spec's rule and worked example.
    rewrite_dates_as_said: bool = setting(
        True, "Span rewrite: copy times as said and let the date step (answer_absolute_dates) date them, "
              "instead of having the model work dates out (false = spec)", paper=False)
    # A follow-up ("And where does she work?") names nothing retrieval can find: one short call rewrites it
    # from the thread's earlier turns first (recollect.steps.start_question). No paper does this.
    rewrite_followups: bool = setting(
        True, "On a thread with earlier turns, rewrite a question that refers back to them into a standalone "
              "question before retrieval (one short call, recorded as rewrite_question)", paper=False)
    # Which of the server's named endpoints answers: a name only, never a URL or a key (recollect.llm.models).
    model: str = setting(
        "", "Model by name, among the endpoints the server configures (RECOLLECT_MODELS); empty = the default model",
        pattern=r"[A-Za-z0-9._-]{0,64}")
    # Injected chat models (tests, applications). None = built from Settings. Python objects: never in the
    # schema Studio and clients see.
    chat_model: SkipJsonSchema[Any] = field(default=None, repr=False, compare=False, metadata={
        "description": "Injected chat model (Python only); None = the configured endpoint"})
    aux_chat_model: SkipJsonSchema[Any] = field(default=None, repr=False, compare=False, metadata={
        "description": "Injected auxiliary chat model (Python only); None = the main model"})
    # Any LangChain BaseRetriever whose documents carry stable ids (MemR3 and rag only).
    retriever: SkipJsonSchema[Any] = field(default=None, repr=False, compare=False, metadata={
        "description": "Injected LangChain retriever with stable document ids (Python only; MemR3 and rag)"})

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # Which settings the caller named, so `profile` never overrides a value given explicitly.
        # Every way in (CLI --set, the SDK's `context` dict, Python keywords) passes keywords.
        self = super().__new__(cls)
        object.__setattr__(self, "_explicit", frozenset(kwargs))
        return self

    def __post_init__(self) -> None:
        if self.profile == "paper":
            explicit: frozenset[str] = getattr(self, "_explicit", frozenset())
            for f in fields(self):
                if "paper" in f.metadata and f.name not in explicit:
                    object.__setattr__(self, f.name, f.metadata["paper"])
        # Every way in (CLI --set, the SDK's `context`, Python) builds a Context, so one check here
        # turns a bad value into one clear error naming the setting instead of a failure deep in a node.
        cls: type = type(self)  # plain `type`: mypy reads a dataclass's `__hash__ = None` as its class's
        for name in _checkers(cls):
            object.__setattr__(self, name, _check_setting(cls, name, getattr(self, name)))

    def with_overrides(self, **overrides: Any) -> Self:
        """A copy with some fields replaced; unknown names raise a clear error.

        The copy keeps which settings were explicit, so a new `profile` re-applies to the others.
        """
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ContextError(f"unknown context setting(s): {', '.join(unknown)}")
        explicit: frozenset[str] = getattr(self, "_explicit", frozenset(known))
        kept = {f.name: getattr(self, f.name) for f in fields(self) if f.name in explicit or not f.init}
        return type(self)(**{**kept, **overrides})

    def narrow(self, cls: type[C]) -> C:
        """This context as `cls` (a graph's own schema): the fields `cls` has, values and explicitness kept."""
        explicit: frozenset[str] = getattr(self, "_explicit", frozenset())
        mine = {f.name for f in fields(self)}
        values = {f.name: getattr(self, f.name) for f in fields(cls) if f.name in mine and f.name in explicit}
        values.update({name: getattr(self, name) for name in PYTHON_ONLY if name in mine})
        out = cls(**values)
        # Values resolved by this context's profile stay as they are (profile is explicit or shared).
        for f in fields(cls):
            if f.name in mine and f.name not in explicit:
                object.__setattr__(out, f.name, getattr(self, f.name))
        return out


C = TypeVar("C", bound=Context)
# Injected Python objects: never listed as settings, never sent by a client.
PYTHON_ONLY = frozenset({"chat_model", "aux_chat_model", "retriever"})
# Server configuration: the CLI and Python set it, a client of `recollect serve` never does.
SERVER_ONLY = frozenset({"data_dir"})


def setting_names(cls: type[Context] = Context) -> list[str]:
    return [f.name for f in fields(cls) if f.name not in PYTHON_ONLY]


def paper_values(cls: type[Context]) -> dict[str, Any]:
    """The settings of `cls` whose paper value differs from ours: {name: paper value}."""
    return {f.name: f.metadata["paper"] for f in fields(cls) if "paper" in f.metadata}
