"""What `remember` adds to a chat agent's reply: the same conversation through the same agent with and without it.

The agent is examples/agent_memory.py's shape: `recall` (the user's memory, no model call) -> `respond` (the chat
model) -> `remember` (recollect.create_remember_node), once without the last node. Every user message is a run;
the two agents take turns on each message (alternating which goes first) in data directories of their own.
Per message it records when the reply was ready (the `respond` update), when the run ended, and the `remember`
node's own time; what remember adds to a reply is the difference of the two agents' run times. After each
run of the agent without remember, the same turns are stored in its memory untimed (`remember()`, then
waiting for its vectors), so both agents recall the same memories and send the model the same prompts. The builds
that call a model run in the background and are not on either path: by default the namespace has MemR3's
chunks only (extended inside `remember`), so the background queue embeds the turns and calls no model;
`--methods hymem` makes it build HyMem's summaries too, which then compete with the replies for the model.
The first message of each agent pays one-off costs (loading the model, opening the stores) and is reported
apart. The goal: remember adds at most 100 ms to a reply.

    python benchmarks/remember_latency.py --questions 20                  # the embedded model (default)
    python benchmarks/remember_latency.py --questions 4 --model scripted  # plumbing check, no model
    python benchmarks/remember_latency.py --questions 20 --methods hymem --out /tmp/remember_hymem
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from langchain_core.messages import SystemMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402

from recollect import AllMethodsContext, create_recall_node, create_remember_node, wait_for_builds  # noqa: E402

GOAL_MS = 100.0
FACTS = [("dog", "Biscuit"), ("sister", "Clara"), ("favourite colour", "teal"), ("home town", "Porto"),
         ("job", "baker"), ("car", "a red Fiat"), ("cat", "Pixel"), ("best friend", "Theo")]
SYSTEM = "You are a friendly assistant. Answer in one short sentence. What you remember:\n{memories}"


def messages(n: int) -> list[str]:
    """n user messages: a fact told, later asked about, and so on."""
    out = []
    for i in range(n):
        thing, value = FACTS[(i // 2) % len(FACTS)]
        out.append(f"My {thing} is {value}." if i % 2 == 0 else f"What is my {thing}?")
    return out


class State(MessagesState):
    recall: dict[str, Any]


def build(model: Any, ctx: AllMethodsContext, *, with_remember: bool, methods: list[str]) -> Any:
    def respond(state: State) -> dict[str, Any]:
        memories = "\n".join(f"- {m['text']}" for m in (state.get("recall") or {}).get("memories") or [])
        return {"messages": [model.invoke([SystemMessage(SYSTEM.format(memories=memories or "(nothing)")),
                                           *state["messages"][-6:]], max_tokens=60)]}

    builder = StateGraph(State)
    builder.add_node("recall", create_recall_node(namespace="{user_id}", k=4, context=ctx))
    builder.add_node("respond", respond)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "respond")
    if with_remember:
        builder.add_node("remember", create_remember_node("{user_id}", methods=methods, context=ctx))
        builder.add_edge("respond", "remember")
        builder.add_edge("remember", END)
    else:
        builder.add_edge("respond", END)
    return builder.compile(checkpointer=InMemorySaver())


def same_memory(agent: Any, ctx: AllMethodsContext, thread: str, methods: list[str]) -> None:
    """Untimed, after a run of the agent without remember: its thread's turns join its memory as well, so
    both agents recall the same memories and send the model the same prompts; what differs between them
    is only what the remember node costs on the reply path (its own time, and a recall waiting for its
    hand-off)."""
    from recollect import remember

    state = agent.get_state({"configurable": {"thread_id": thread, "user_id": "bench"}}).values
    remember(state["messages"], namespace="bench", thread_id=thread, methods=methods or None, context=ctx)
    wait_for_builds(timeout=600)  # its vectors too, so no work of it overlaps the next timed run


def timed_turn(agent: Any, text: str, thread: str) -> dict[str, float]:
    """ms from the message to the reply (`respond` done), to the run's end, and spent in the `remember` node."""
    config = {"configurable": {"thread_id": thread, "user_id": "bench"}}
    start = last = time.perf_counter()
    marks: dict[str, float] = {}
    for update in agent.stream({"messages": [("user", text)]}, config, stream_mode="updates"):
        now = time.perf_counter()
        for node in update:
            marks[node] = (now - last) * 1000
            if node == "respond":
                marks["reply"] = (now - start) * 1000
        last = now
    return {"reply_ms": marks["reply"], "run_ms": (time.perf_counter() - start) * 1000,
            "remember_ms": marks.get("remember", 0.0)}


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"mean": round(statistics.fmean(ordered), 1), "p50": round(statistics.median(ordered), 1),
            "p90": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 1), "max": round(ordered[-1], 1)}


def chat_model(kind: str, ctx: AllMethodsContext) -> Any:
    if kind == "scripted":
        from recollect.llm.scripted import scripted

        return scripted(default="Noted.")
    from recollect.llm.models import get_chat_model

    return get_chat_model(ctx)


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(args.data_dir or tempfile.mkdtemp(prefix="remember-latency-"))
    methods = [m for m in args.methods.split(",") if m]
    try:
        agents, contexts = {}, {}
        for variant in ("without", "with"):
            ctx = contexts[variant] = AllMethodsContext(data_dir=str(root / variant))
            agents[variant] = build(chat_model(args.model, ctx), ctx, with_remember=variant == "with", methods=methods)

        def turn(variant: str, text: str) -> dict[str, float]:
            timed = timed_turn(agents[variant], text, "t")
            if variant == "without":
                same_memory(agents[variant], contexts[variant], "t", methods)
            return timed

        texts = messages(args.questions + 1)
        first = {v: turn(v, texts[0]) for v in agents}  # one-off costs, apart
        rows = []
        for i, text in enumerate(texts[1:], start=1):
            order = ("without", "with") if i % 2 else ("with", "without")
            got = {v: turn(v, text) for v in order}
            rows.append({"message": text, **{f"{v}_{k}": round(x, 1) for v in order for k, x in got[v].items()}})
        builds_done = wait_for_builds(timeout=args.build_timeout)
        added = [r["with_run_ms"] - r["without_run_ms"] for r in rows]
        result = {
            "command": "python benchmarks/remember_latency.py " + shlex.join(args.argv),
            "model": args.model, "embedder": os.environ.get("RECOLLECT_EMBEDDER", "minilm"),
            "methods_built_in_background": methods, "questions": len(rows), "goal_ms": GOAL_MS,
            "first_message": {v: {k: round(x, 1) for k, x in t.items()} for v, t in first.items()},
            "reply_ms": {"without": summary([r["without_reply_ms"] for r in rows]),
                         "with": summary([r["with_reply_ms"] for r in rows])},
            "run_ms": {"without": summary([r["without_run_ms"] for r in rows]),
                       "with": summary([r["with_run_ms"] for r in rows])},
            "remember_node_ms": summary([r["with_remember_ms"] for r in rows]),
            "added_ms": summary(added),
            "background_builds_finished": builds_done,
            "rows": rows,
        }
        # the node's own time, and what a whole run with it takes over one without (the typical message)
        result["goal_met"] = result["remember_node_ms"]["p90"] <= GOAL_MS and result["added_ms"]["p50"] <= GOAL_MS
        return result
    finally:
        if not args.data_dir:
            shutil.rmtree(root, ignore_errors=True)


def markdown(result: dict[str, Any]) -> str:
    def line(name: str, s: dict[str, float]) -> str:
        return f"| {name} | {s['mean']} | {s['p50']} | {s['p90']} | {s['max']} |"

    verdict = "met" if result["goal_met"] else "NOT met"
    return "\n".join([
        "# What remember adds to a reply", "",
        f"`{result['command']}`", "",
        f"Model: {result['model']}; embedder: {result['embedder']}; {result['questions']} messages after the first; "
        f"built in the background besides the turns' vectors: {', '.join(result['methods_built_in_background']) or 'nothing'}"
        f" (finished: {result['background_builds_finished']}).", "",
        "| ms | mean | p50 | p90 | max |", "|---|---:|---:|---:|---:|",
        line("reply ready, without remember", result["reply_ms"]["without"]),
        line("reply ready, with remember", result["reply_ms"]["with"]),
        line("run, without remember", result["run_ms"]["without"]),
        line("run, with remember", result["run_ms"]["with"]),
        line("remember node", result["remember_node_ms"]),
        line("run with minus run without (same message)", result["added_ms"]), "",
        f"Goal: remember adds at most {result['goal_ms']:.0f} ms to a reply (the remember node's p90, and the "
        f"median difference of the two runs): **{verdict}**. The reply is ready before the remember node starts; "
        "the node hands the turns to a worker thread, and the next recall waits for that thread if it is still "
        "writing (in 'reply ready, with remember'). The agent without remember gets the same turns stored "
        "after each of its runs, untimed, so both recall the same memories and send the same prompts; the "
        "difference of the two runs still holds the model's own variation between them.",
        f"First message (one-off costs): {json.dumps(result['first_message'])}", ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20, help="user messages measured (after the first)")
    parser.add_argument("--model", choices=["embedded", "scripted"], default="embedded",
                        help="embedded: recollect's configured model (the local one unless RECOLLECT_LLM_BASE_URL); "
                             "scripted: no model, a plumbing check")
    parser.add_argument("--methods", default="", help="memories to build in the background too, e.g. hymem")
    parser.add_argument("--data-dir", help="keep the two data directories here (default: a temporary one)")
    parser.add_argument("--build-timeout", type=float, default=600.0, help="seconds to wait for background builds")
    parser.add_argument("--out", default="benchmarks/reports", help="folder for remember_latency.json / .md")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.questions < 1:
        parser.error("--questions must be at least 1")
    result = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "remember_latency.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / "remember_latency.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
