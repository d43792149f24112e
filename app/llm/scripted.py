"""A scripted chat model: returns prepared replies and records every call.

Used by the unit tests (no network) and by the overhead benchmark (a zero-latency model). A reply
can be a string (message content), a dict (serialised to JSON content), an `AIMessage` (e.g. with
native `tool_calls`), or a callable `(messages, kwargs) -> reply` that decides from the prompt.
When the script runs out, `default` is used (itself any of those forms).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field, PrivateAttr

Reply = str | dict | list | AIMessage | Callable[[list[BaseMessage], dict[str, Any]], Any]


class ScriptedChatModel(BaseChatModel):
    """A deterministic fake; `calls` holds `{messages, kwargs}` of every request in order."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    default: Any = None
    recollect_structured_method: str = "json_object_schema"
    with_usage: bool = True
    _calls: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[dict[str, Any]]:
        return self._calls

    def push(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def prompts(self) -> list[str]:
        """Every call's messages joined into one text (for assertions about prompt content)."""
        return ["\n".join(str(m.content) for m in c["messages"]) for c in self._calls]

    def _next(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        with self._lock:
            self._calls.append({"messages": list(messages), "kwargs": dict(kwargs)})
            reply = self.script.pop(0) if self.script else self.default
        if callable(reply) and not isinstance(reply, AIMessage):
            reply = reply(messages, kwargs)
        if reply is None:
            reply = ""
        if isinstance(reply, AIMessage):
            msg = reply.model_copy()
        elif isinstance(reply, dict | list):
            msg = AIMessage(content=json.dumps(reply))
        else:
            msg = AIMessage(content=str(reply))
        if self.with_usage and not msg.usage_metadata:
            n_in = sum(len(str(m.content).split()) for m in messages)
            n_out = max(1, len(str(msg.content).split()))
            msg.usage_metadata = {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
        return msg

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages, kwargs))])

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Runnable:
        return self.bind(tools=list(tools), tool_choice=tool_choice, **kwargs)


def scripted(replies: Iterable[Reply] = (), default: Reply | None = None, **kw: Any) -> ScriptedChatModel:
    return ScriptedChatModel(script=list(replies), default=default, **kw)
