"""A small LangGraph chat agent that remembers across threads with recollect, offline on the embedded model.

    python examples/agent_memory.py                  # chat; /user NAME and /thread NAME switch, /quit ends
    python examples/agent_memory.py --user alice --thread monday

Each turn runs three nodes:

    recall   -> what alice's memory holds about the newest message (recollect.create_recall_node: no model call)
    respond  -> the chat model answers, the recalled memories in its system prompt
    remember -> the thread's newest turns join alice's memory (recollect.create_remember_node), after the reply

The namespace is the run's `user_id` (the template "{user_id}"), never something the model chooses: what
alice says in one thread is recalled in her other threads, and never in bob's. The model is recollect's
configured one (the embedded Qwen2.5 on llama.cpp unless RECOLLECT_LLM_BASE_URL names another endpoint);
memories live in the data directory (RECOLLECT_DATA_DIR).
"""

from __future__ import annotations

import argparse
from typing import Any, NotRequired

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from recollect import AllMethodsContext, create_recall_node, create_remember_node

NAMESPACE = "{user_id}"  # one memory per user, filled from each run's config
SYSTEM = ("You are a friendly assistant with a long-term memory of your past conversations with this user. "
          "Use what you remember when it helps; never invent memories.\nWhat you remember:\n{memories}")


class AgentState(MessagesState):
    recall: NotRequired[dict[str, Any]]  # what the recall node found for the newest message


def build_agent(chat_model: BaseChatModel | None = None, *, context: AllMethodsContext | None = None,
                checkpointer: Any = None) -> CompiledStateGraph:
    """The agent's graph; `chat_model` answers (default: recollect's configured model), `context` holds
    recollect's settings (data directory, ...), `checkpointer` keeps each thread's messages."""
    ctx = context or AllMethodsContext()
    if chat_model is None:
        from recollect.llm.models import get_chat_model

        chat_model = get_chat_model(ctx)

    def respond(state: AgentState) -> dict[str, Any]:
        memories = [m["text"] for m in (state.get("recall") or {}).get("memories") or []]
        system = SYSTEM.format(memories="\n".join(f"- {m}" for m in memories) or "(nothing yet)")
        return {"messages": [chat_model.invoke([SystemMessage(system), *state["messages"]])]}

    builder = StateGraph(AgentState)
    builder.add_node("recall", create_recall_node(namespace=NAMESPACE, k=4, context=ctx))
    builder.add_node("respond", respond)
    builder.add_node("remember", create_remember_node(NAMESPACE, context=ctx))
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "respond")
    builder.add_edge("respond", "remember")
    builder.add_edge("remember", END)
    return builder.compile(checkpointer=checkpointer)


def chat(agent: CompiledStateGraph, user: str, thread: str) -> None:
    """Read lines from the terminal and answer them; /user and /thread switch, /quit ends."""
    print(f"user {user}, thread {thread} (/user NAME, /thread NAME, /quit)")
    while True:
        try:
            line = input(f"{user}@{thread}> ").strip()
        except EOFError:
            return
        if line in ("/quit", "/exit"):
            return
        if line.startswith(("/user ", "/thread ")):
            command, _, value = line.partition(" ")
            user, thread = (value.strip(), thread) if command == "/user" else (user, value.strip())
            continue
        if line:
            config = {"configurable": {"thread_id": f"{user}/{thread}", "user_id": user}}
            out = agent.invoke({"messages": [("user", line)]}, config)
            print(out["messages"][-1].content)


def main() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", default="me")
    parser.add_argument("--thread", default="1")
    args = parser.parse_args()
    chat(build_agent(checkpointer=InMemorySaver()), args.user, args.thread)


if __name__ == "__main__":
    main()
