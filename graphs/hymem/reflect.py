"""HyMem's reflect module: judge the draft and maybe rewrite the retrieval query for one more round
(README.md in this folder, "Nodes")."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from recollect.graphs.hymem.common import round_of
from recollect.graphs.hymem.replies import ReflectReply, call
from recollect.graphs.hymem.settings import HyMemContext
from recollect.graphs.hymem.state import HyMemState
from recollect.trace import emit


def reflect(state: HyMemState, runtime: Runtime[HyMemContext]) -> dict[str, Any]:
    ctx = runtime.context
    rnd = round_of(state)
    query = state.get("query") or state["question"]
    draft = state.get("draft_answer") or ""
    if rnd + 1 >= ctx.hymem_max_rounds:
        return {"hymem_next": "answer", "trace": emit("reflect", round=rnd, next="answer", calls=0,
                              why=f"no rounds left (max_rounds={ctx.hymem_max_rounds}); no reflect call")}
    if not draft:
        return {"hymem_next": "answer", "trace": emit("reflect", round=rnd, next="answer", calls=0,
                              why="nothing to judge: no draft answer (empty memory); no reflect call")}
    res = call(ctx, "reflect", ReflectReply, "reflect", question=state["question"], answer=draft)
    reply = res.value
    go_on = False
    if reply is None:
        satisfied, new_q, why = True, "", "reflect output invalid: treated as satisfied, answer kept"
    else:
        satisfied, new_q = reply.finished == 1, reply.new_question
        if satisfied:
            why = "reflect satisfied"
        elif not new_q:
            why = "not satisfied but no new question: stop"
        elif " ".join(new_q.lower().split()) == " ".join(query.lower().split()):
            why = "not satisfied but the new question equals the current query: stop"
        else:
            go_on, why = True, "not satisfied: next round with the rewritten query"
    update: dict[str, Any] = {
        "usage": res.usage,
        "hymem_next": "light" if go_on else "answer",
        "hymem_reflections": [{"round": rnd, "satisfied": satisfied, "new_question": new_q or None}],
        "trace": emit("reflect", round=rnd, satisfied=satisfied, new_question=new_q or None,
                      next="light" if go_on else "answer", why=why,
                      **(res.failure_note() if reply is None else {})),
    }
    if go_on:
        update.update(query=new_q, iteration=rnd + 1)
    return update
