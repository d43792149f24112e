"""examples/agent_memory.py with a scripted model: a fact told in one thread is recalled in another thread of
the same user, and never in another user's."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from langchain_core.messages import SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from recollect import wait_for_builds
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import scripted
from recollect.memory.workspace import open_workspace

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_memory.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_memory_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # LangGraph reads the state's annotations through the module
    spec.loader.exec_module(module)
    return module


def _agent_reply(messages: list[Any], kwargs: dict[str, Any]) -> str:
    """The agent's model: answers a question about the dog from the memories in its system prompt only."""
    system = next(str(m.content) for m in messages if isinstance(m, SystemMessage))
    asked = str(messages[-1].content)
    if "dog" in asked and "?" in asked:
        known = re.search(r"dog is called (\w+)", system)
        return f"Your dog is called {known[1]}." if known else "You have not told me about a dog."
    return "Noted!"


def test_a_fact_told_in_one_thread_is_recalled_in_another_of_the_same_user_only(data_dir: str) -> None:
    model = scripted(default=_agent_reply)
    agent = _example().build_agent(model, context=AllMethodsContext(data_dir=data_dir), checkpointer=InMemorySaver())

    def say(user: str, thread: str, text: str) -> str:
        out = agent.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": thread, "user_id": user}})
        return str(out["messages"][-1].content)

    assert say("alice", "monday", "My dog is called Biscuit.") == "Noted!"
    assert say("alice", "tuesday", "What is my dog called?") == "Your dog is called Biscuit."
    assert say("bob", "tuesday-bob", "What is my dog called?") == "You have not told me about a dog."
    assert wait_for_builds(timeout=60)  # the last remember nodes handed their turns to the append worker
    # what each user's memory holds: alice both threads, each its own session; bob his own question only
    ws = open_workspace(data_dir)
    alice = [[(t.speaker, t.text) for t in s.turns] for s in ws.sessions("alice")]
    assert alice == [[("User", "My dog is called Biscuit."), ("Assistant", "Noted!")],
                     [("User", "What is my dog called?"), ("Assistant", "Your dog is called Biscuit.")]]
    assert "Biscuit" not in " ".join(t.text for t in ws.turns("bob").values())
    # the model saw alice's memory in her second thread only; bob's prompt held none of it
    prompts = model.prompts()
    assert "Biscuit" in prompts[1] and "Biscuit" not in prompts[2]
