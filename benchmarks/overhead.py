"""Framework overhead per question with a zero-latency scripted model, over 1k / 10k / 100k turns.

What is measured: everything a MemR3 question costs except the LLM itself — graph scheduling,
state reducers, prompt rendering, JSON validation, Chroma queries, mask bookkeeping, BM25 fusion.
Stored turns use the hashing embedder (MiniLM would take ~40 min to embed 100k turns on 2 cores);
the MiniLM query-embedding cost is measured separately and reported beside it. Each size is measured
for each document store (`RECOLLECT_DOC_STORE`: recollect.db, or LangGraph's SQLite store; `postgres`:
LangGraph's Postgres store, RECOLLECT_POSTGRES_URI), and the report keeps the previous report's numbers
beside the new ones.

The Postgres store is the database of --postgres-uri (default: RECOLLECT_POSTGRES_URI); with neither, the
benchmark starts its own server through pgserver (the `dev` extra) in a temporary directory and stops it at
the end. In a database it is given, it replaces the namespace `bench` before each size.

    python benchmarks/overhead.py [--sizes 1000,10000,100000] [--questions 30]
                                  [--doc-stores recollect_db,langgraph,postgres] [--postgres-uri URI]
                                  [--out benchmarks/reports]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from recollect.dialogue.models import Conversation, Session, Turn  # noqa: E402
from recollect.graphs.memr3.graph import graph  # noqa: E402
from recollect.graphs.registry import AllMethodsContext  # noqa: E402
from recollect.ingestion import ingest_conversation  # noqa: E402
from recollect.llm.scripted import scripted  # noqa: E402
from recollect.memory.embeddings import HashEmbeddings  # noqa: E402
from recollect.memory.workspace import Workspace, register_workspace  # noqa: E402
from recollect.settings import get_settings  # noqa: E402

WORDS = ["garden", "trip", "dog", "cat", "violin", "pottery", "marathon", "job", "city", "sister", "brother", "concert", "book", "movie", "kayak", "beach", "bakery", "coffee", "school", "museum", "painting", "hiking", "camping", "festival", "recipe", "guitar", "train", "flight", "river"]
NAMES = ("Ann", "Bob")


def synthetic(n_turns: int, seed: int = 7) -> Conversation:
    rng = random.Random(seed)
    sessions, per = [], 25
    for s in range(1, n_turns // per + 1):
        date = f"10:00 am on {1 + s % 28} May, {2000 + s // 300}"
        turns = tuple(
            Turn(id=f"D{s}:{k}", speaker=NAMES[k % 2], session=s, index=k, date_time=date,
                 text=" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))))
            for k in range(1, per + 1)
        )
        sessions.append(Session(s, date, None, turns))
    return Conversation(id=f"synthetic-{n_turns}", speakers=NAMES, sessions=tuple(sessions))


def router_script(msgs, kw):  # noqa: ANN001, ANN201 - always retrieve: the worst case at the defaults
    if "decision" not in json.dumps(kw.get("response_format", {})):
        return {"answer": "garden", "supports": []}
    return {"evidence": ["[D1:1] a fact"], "gaps": ["more"], "decision": "retrieve",
            "retrieval_query": "garden festival"}


class _TimedDocs:
    """The workspace's document store, timing every call in CPU time: what a question spends in the store
    itself."""

    def __init__(self, docs: object) -> None:
        self.docs, self.seconds, self.calls = docs, 0.0, 0

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.docs, name)
        if name == "transaction" or not callable(attr):
            return attr

        def timed(*args: object, **kwargs: object) -> object:
            start = time.thread_time()  # store calls run in the calling thread
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds += time.thread_time() - start
                self.calls += 1

        return timed


def _store_costs(ws: Workspace) -> tuple[float, float]:
    """CPU time of reading every turn from the store (the first question's corpus load; best of 3) and of one
    `turns` call that finds its cache current (each retrieval step makes some)."""
    loads = []
    for _ in range(3):
        ws._turn_cache.clear()
        start = time.process_time()
        ws.turns("bench")
        loads.append((time.process_time() - start) * 1000)
    start = time.process_time()
    for _ in range(500):
        ws.turns("bench")
    return min(loads), (time.process_time() - start) * 1e6 / 500


def _summary(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    return {"mean": round(statistics.mean(v), 2), "median": round(statistics.median(v), 2),
            "p90": round(v[int(0.9 * (len(v) - 1))], 2)}


def _workspace(data: str, doc_store: str, postgres_uri: str) -> Workspace:
    """A workspace on `doc_store`. RECOLLECT_POSTGRES_URI is set only while the Postgres one opens its store:
    the stores stay side by side in one process, each workspace keeping the store it opened."""
    if doc_store != "postgres":
        return Workspace(data, embeddings=HashEmbeddings(), doc_store=doc_store)
    os.environ["RECOLLECT_POSTGRES_URI"] = postgres_uri
    get_settings.cache_clear()
    try:
        ws = Workspace(data, embeddings=HashEmbeddings())
    finally:
        del os.environ["RECOLLECT_POSTGRES_URI"]
        get_settings.cache_clear()
    ws.forget_namespace("bench")  # one database holds every size's namespace
    return ws


def measure(n_turns: int, questions: int, doc_stores: list[str], postgres_uri: str = "") -> list[dict]:
    """One row per document store. Wall time and this process's CPU time (what other processes' load moves
    least); the stores take turns question by question, so on a shared machine all meet the same load, and
    each goes first on every other question."""
    conv = synthetic(n_turns)
    built = {}
    for doc_store in doc_stores:
        data = tempfile.mkdtemp(prefix="recollect-overhead-")
        ws = register_workspace(_workspace(data, doc_store, postgres_uri))
        t0, c0 = time.monotonic(), time.process_time()
        ingest_conversation(conv, "bench", AllMethodsContext(data_dir=data), methods=["memr3"], ws=ws)
        built[doc_store] = (data, ws, time.monotonic() - t0, time.process_time() - c0, *_store_costs(ws))
        ws.docs = _TimedDocs(ws.docs)  # type: ignore[assignment]
    rng = random.Random(1)
    qs = [f"When did they talk about the {rng.choice(WORDS)} and the {rng.choice(WORDS)}?" for _ in range(questions)]
    wall: dict[str, list[float]] = {d: [] for d in doc_stores}
    cpu: dict[str, list[float]] = {d: [] for d in doc_stores}
    first: dict[str, tuple[float, float]] = {}
    steps: list[int] = []
    for i, q in enumerate(qs):
        # Alternate which store goes first: the second run of a question finds caches keyed by its text warm.
        for doc_store in doc_stores if i % 2 == 0 else doc_stores[::-1]:
            data = built[doc_store][0]
            ctx = AllMethodsContext(data_dir=data, chat_model=scripted(default=router_script))
            start, cpu_start = time.perf_counter(), time.process_time()
            *_, out = graph.stream({"namespace": "bench", "question": q}, context=ctx, config={"recursion_limit": 20},
                                   stream_mode="values")  # the final state values, trace included
            elapsed, cpu_ms = (time.perf_counter() - start) * 1000, (time.process_time() - cpu_start) * 1000
            if i:  # the first question pays one-off corpus loading; it is reported separately
                wall[doc_store].append(elapsed)
                cpu[doc_store].append(cpu_ms)
            else:
                first[doc_store] = (elapsed, cpu_ms)
            steps.append(len(out["trace"]))
    rows = []
    for doc_store, (_data, ws, ingest_s, ingest_cpu_s, load_ms, cached_us) in built.items():
        timed = ws.docs
        w, c = _summary(wall[doc_store]), _summary(cpu[doc_store])
        rows.append({
            "doc_store": doc_store, "turns": n_turns, "chunks": ws.index("memr3c256", "bench").count(),
            "ingest_s": round(ingest_s, 1), "ingest_cpu_s": round(ingest_cpu_s, 1),
            "load_turns_cpu_ms": round(load_ms, 1), "cached_turns_cpu_us": round(cached_us, 1),
            "questions": questions, "steps_per_question": statistics.mean(steps),
            "docs_calls_per_question": round(timed.calls / questions, 1),
            "docs_cpu_ms_per_question": round(timed.seconds * 1000 / questions, 3),
            "first_question_ms": round(first[doc_store][0], 1), "first_question_cpu_ms": round(first[doc_store][1], 1),
            "mean_ms": w["mean"], "median_ms": w["median"], "p90_ms": w["p90"],
            "cpu_mean_ms": c["mean"], "cpu_median_ms": c["median"], "cpu_p90_ms": c["p90"],
        })
    for data, *_ in built.values():  # a 100k-turn data directory holds about 500 MB
        shutil.rmtree(data, ignore_errors=True)
    return rows


def minilm_query_ms(n: int = 20) -> float | None:
    try:
        from recollect.memory.embeddings import MiniLMEmbeddings

        emb = MiniLMEmbeddings()
        emb._encode(["warm up"])
        start = time.perf_counter()
        for i in range(n):
            emb._encode([f"what did they say about topic number {i}?"])
        return round((time.perf_counter() - start) * 1000 / n, 2)
    except Exception:  # the embeddings extra is optional for this benchmark
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--doc-stores", default="recollect_db,langgraph,postgres")
    ap.add_argument("--postgres-uri", default=os.environ.pop("RECOLLECT_POSTGRES_URI", ""),
                    help="the database of the postgres store (default: RECOLLECT_POSTGRES_URI; else a pgserver "
                         "started for the run)")
    ap.add_argument("--note", default="", help="conditions of this run (e.g. other load on the machine)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "reports"))
    args = ap.parse_args()
    stores = args.doc_stores.split(",")
    load_before = os.getloadavg()
    with _postgres(args.postgres_uri if "postgres" in stores else "-") as (uri, pg_where):
        # warm-up: the process's first graph run imports and compiles what every later one reuses
        measure(250, 2, stores, uri)
        rows = [row for size in args.sizes.split(",") for row in measure(int(size), args.questions, stores, uri)]
    q_ms = minilm_query_ms()
    load = "load average (1/5/15 min) {:.2f} / {:.2f} / {:.2f} at the start, {:.2f} / {:.2f} / {:.2f} at the end".format(
        *load_before, *os.getloadavg())
    cmd = "python benchmarks/overhead.py " + " ".join(sys.argv[1:])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    previous = _previous(out / "overhead.json")
    report = {"command": cmd.strip(), "rows": rows, "minilm_query_embedding_ms": q_ms, "conditions": args.note,
              "machine_load": load, "postgres": pg_where, "previous": previous,
              "note": "worst case at the defaults: 5 retrievals + 5 router calls + 1 answer call per question, zero-latency scripted model"}
    (out / "overhead.json").write_text(json.dumps(report, indent=2))
    lines = [
        "# Framework overhead per MemR3 question (zero-latency scripted model)", "",
        f"Command: `{report['command']}`", "",
        "Each question is MemR3's worst case at the defaults: 5 × (masked hybrid retrieval over Chroma + BM25,",
        "router call) and the answer call, 11 graph steps, 6 scripted LLM calls. Stored turns use the hashing embedder;",
        f"a MiniLM query embedding adds about {q_ms} ms per retrieval (cached per text) and is not included.", "",
        "Documents: `recollect_db` = recollect.db (DocStore), `langgraph` = items of LangGraph's SQLite store",
        "(store.sqlite, StoreDocs), `postgres` = items of LangGraph's Postgres store (RECOLLECT_POSTGRES_URI,",
        f"StoreDocs; {pg_where}).",
        "Times are wall-clock and, in brackets, this process's CPU time, which other processes' load moves",
        "least. *load turns*: reading every turn from the store (CPU); *cached turns*: one",
        "`Workspace.turns` call that finds its cache current (CPU; each retrieval step makes some); *store per",
        "question*: CPU time of a question's document-store calls and their number (the first question included).",
        *(["", f"Conditions: {args.note}"] if args.note else []), "", f"Machine: {load}.", "",
        "| documents | stored turns | chunks | ingest s (CPU) | load turns ms | cached turns µs "
        "| store per question ms (calls) | first question ms (CPU) | mean ms (CPU) | median ms (CPU) | p90 ms (CPU) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['doc_store']} | {r['turns']:,} | {r['chunks']:,} | {r['ingest_s']} ({r['ingest_cpu_s']}) | "
            f"{r['load_turns_cpu_ms']} | {r['cached_turns_cpu_us']} | {r['docs_cpu_ms_per_question']} "
            f"({r['docs_calls_per_question']}) | {r['first_question_ms']} ({r['first_question_cpu_ms']}) | "
            f"{r['mean_ms']} ({r['cpu_mean_ms']}) | {r['median_ms']} ({r['cpu_median_ms']}) | {r['p90_ms']} ({r['cpu_p90_ms']}) |")
    if previous:
        lines += ["", f"Previous report (`{previous.get('command')}`{', ' + previous['conditions'] if previous.get('conditions') else ''}):", "",
                  "| documents | stored turns | ingest (s) | first question (ms) | mean (ms) | median (ms) | p90 (ms) |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for r in previous["rows"]:
            lines.append(f"| {r.get('doc_store', 'recollect_db')} | {r['turns']:,} | {r['ingest_s']} | "
                         f"{r['first_question_ms']} | {r['mean_ms']} | {r['median_ms']} | {r['p90_ms']} |")
    lines += ["", "Target: under 50 ms per question at 10k turns. The first question loads the corpus for BM25",
              "and mask bookkeeping once per process."]
    (out / "overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


@contextmanager
def _postgres(uri: str) -> Iterator[tuple[str, str]]:
    """(URI, where it is) of the Postgres store: `uri`, or a pgserver started here ("-": not measured)."""
    if uri == "-":
        yield "", "not measured"
        return
    if uri:
        yield uri, "the database of --postgres-uri"
        return
    import pgserver

    from recollect.memory.backends import close_postgres

    server = pgserver.get_server(Path(tempfile.mkdtemp(prefix="recollect-overhead-pg-")) / "pgdata",
                                 cleanup_mode="delete")
    try:
        version = server.psql("SHOW server_version;").split("\n")[2].strip()
        yield server.get_uri(), f"Postgres {version} started by pgserver on this machine, over a Unix socket"
    finally:
        close_postgres()
        server.cleanup()


def _previous(path: Path) -> dict | None:
    """The last report's command, conditions and rows (not its own 'previous': one generation is kept)."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return {k: old.get(k) for k in ("command", "conditions", "rows")}


if __name__ == "__main__":
    main()
