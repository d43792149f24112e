"""MRAgent's prompts: the navigate prompt and the forced final prompt, rendered from state under a hard budget.

Both prompts show H (the kept memories, `critical_memories`) first with full text. The navigate prompt
then shows the seed, the newest round's tool results turn by turn, and earlier calls as one line each
(results not kept are dropped; README.md in this folder). The forced final prompt shows H, then tool
results newest round first (raw turns and derived text such as dates and persona facts), then the seed.

Every renderer returns what it put in front of the model: a turn joins `masks` (and counts as shown
in the trace) only when its raw line was rendered, so a result cut for lack of room stays unmasked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recollect.budget import TokenBudget
from recollect.graphs.mragent.layout import turn_of
from recollect.graphs.mragent.protocol import KEEP_TOOL, call_text
from recollect.graphs.mragent.seed import SEED_SECTIONS
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.state import MRAgentState
from recollect.graphs.mragent.store import CueTagGraph
from recollect.graphs.mragent.tools import REGISTRY, tool_catalog
from recollect.llm.usage import estimate_tokens
from recollect.prompts import load_prompt, render_prompt

P = "mragent"
# Tools whose derived text (not raw turns) is evidence for the final answer: dates and persona facts.
EVIDENCE_TOOLS = frozenset({"query_conversation_time", "query_personal_aspect"})
MAX_IDS_PER_LINE = 8  # ids listed per earlier call: enough to navigate on, cheap in tokens


@dataclass
class Rendered:
    """A prompt plus what it showed: raw turns (→ masks, evidence) and every id visible in it."""

    prompt: str = ""
    shown_turns: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    visible: list[str] = field(default_factory=list)
    not_shown: list[str] = field(default_factory=list)  # returned turns cut for lack of room (stay unmasked)


def _room(tokens: int) -> TokenBudget:
    """A prompt's hard budget: a line goes in only if it fits, costing its tokens plus one for its newline."""
    return TokenBudget(tokens, per_line=1)


class _Out:
    """Puts lines into a prompt section under the budget and records what the model was shown."""

    def __init__(self, g: CueTagGraph, room: TokenBudget, rendered: Rendered) -> None:
        self.g, self.room, self.r = g, room, rendered

    def turn(self, lines: list[str], tid: str, line: str) -> bool:
        if tid in self.r.shown_turns:
            return True
        if not self.room.take(line):
            return False
        lines.append(line)
        self.r.shown_turns.append(tid)
        self.r.evidence.append(line)
        self.r.visible += [tid, *self.g.sentences_of(tid)]
        return True

    def text(self, lines: list[str], line: str, visible: list[str] | None = None) -> bool:
        if not self.room.take(line):
            return False
        lines.append(line)
        self.r.visible += visible or []
        return True


def _critical(out: _Out, critical: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    cut: list[str] = []
    for m in critical:
        tid = m["id"]
        if tid not in out.g.turns or not out.turn(lines, tid, out.g.raw_line(tid)):
            cut.append(tid)
    if cut:
        out.text(lines, f"(kept, not shown for lack of room: {', '.join(cut)})")
    return "\n".join(lines) or "(none yet)"


def _seed(out: _Out, seed: dict[str, Any]) -> str:
    parts = []
    for key, title in (("time_events", "Events in the question's time window"), ("key_events", "Key events"),
                       ("ranked_turns", "Turns most similar to the question"),
                       ("cue_tags", "Cue -> tags (use with query_tag_events)"),
                       ("cue_tag_events", "Events from strongly matching cue tags"), ("topics", "Similar topics")):
        lines: list[str] = []
        for line in seed.get(key) or []:
            head = line.split(": ", 1)[0]
            if key in SEED_SECTIONS and (tid := turn_of(head, out.g.turns)) is not None:
                if tid in out.r.shown_turns:  # already shown above as a kept memory
                    continue
                out.turn(lines, tid, line)
            else:
                out.text(lines, line, [head] if key == "topics" else [])
        if lines:
            parts.append(f"{title}:\n" + "\n".join(lines))
    return "\n".join(parts) or "(nothing matched the question's cues)"


def _entry(out: _Out, entry: dict[str, Any], lines: list[str], derived: bool = True) -> bool:
    """One tool result, turn by turn. Returns False once the room ran out."""
    parts = entry.get("parts") or [[entry.get("text") or "", None]]
    shown = set(entry.get("shown") or [])
    derived_visible = [i for i in entry.get("visible_ids") or [] if i not in shown]
    for line, tid in parts:
        if tid:
            if not out.turn(lines, tid, line):
                out.r.not_shown.append(tid)
        elif derived and not out.text(lines, line, derived_visible):
            return False
    return True


def _results(out: _Out, log: list[dict[str, Any]], rnd: int) -> str:
    lines: list[str] = []
    for entry in (e for e in log if e["round"] == rnd):
        if not out.text(lines, f"[{call_text(entry)}]"):
            break
        _entry(out, entry, lines)
    if out.r.not_shown:
        out.text(lines, f"(not shown for lack of room: {', '.join(dict.fromkeys(out.r.not_shown))})")
    return "\n".join(lines) or "(none)"


def _earlier(out: _Out, log: list[dict[str, Any]], rnd: int, oldest_first: bool = False) -> str:
    """One line per earlier call; the newest ones are listed when not all fit. `oldest_first` (the prefix
    layout) prints the same lines in call order, so each round's list extends the last one's."""
    lines: list[str] = []
    note: list[str] = []
    older = [e for e in reversed(log) if e["round"] < rnd]
    for n, entry in enumerate(older):
        ids = entry.get("result_ids") or []
        listed = ", ".join(ids[:MAX_IDS_PER_LINE]) + (f" (+{len(ids) - MAX_IDS_PER_LINE})" if len(ids) > MAX_IDS_PER_LINE else "")
        what = f"error: {entry['error']}" if entry.get("error") else (f"ids: {listed}" if ids else "nothing new")
        if not out.text(lines, f"[round {entry['round']}] {call_text(entry)} -> {what}"):
            out.text(note, f"({len(older) - n} earlier calls not listed)")
            break
    if oldest_first:
        return "\n".join(note + lines[::-1]) or "(none)"
    return "\n".join(lines + note) or "(none)"


def _protocol(ctx: MRAgentContext) -> tuple[str, str]:
    # rendered (not just loaded) so the templates' escaped braces reach the model as single braces
    if ctx.mra_tool_protocol == "native":
        return render_prompt(P, "protocol_native"), ", ".join([*REGISTRY, KEEP_TOOL])
    return render_prompt(P, "protocol_json"), tool_catalog()


def _finish(rendered: Rendered) -> Rendered:
    rendered.visible = list(dict.fromkeys(rendered.visible))
    rendered.not_shown = [t for t in dict.fromkeys(rendered.not_shown) if t not in rendered.shown_turns]
    return rendered


def _critical_after_seed(out: _Out, critical: list[dict[str, Any]], seed: dict[str, Any]) -> tuple[list[str], list[str], set[str]]:
    """The prefix layout's kept memories, charged before the seed as in the paper layout: lines for those the
    seed does not hold, the ids cut for room, and the seed's turn ids (kept ones are shown there)."""
    in_seed = {tid for key in SEED_SECTIONS for line in seed.get(key) or []
               if (tid := turn_of(line.split(": ", 1)[0], out.g.turns)) is not None}
    lines: list[str] = []
    cut: list[str] = []
    for m in critical:
        tid = m["id"]
        if tid not in in_seed and (tid not in out.g.turns or not out.turn(lines, tid, out.g.raw_line(tid))):
            cut.append(tid)
    return lines, cut, in_seed


def _navigate_layout(state: MRAgentState, ctx: MRAgentContext, g: CueTagGraph, pieces: dict[str, Any]) -> Rendered:
    """The prefix layout (mra_prefix_layout): instructions, tools, the question and the seed first (the same every
    round), then the earlier calls oldest first (each round appends), then what changes: kept memories, the
    newest results, the round and the calls left. The same lines as the paper layout under the same budget,
    except that a kept turn the seed holds is shown in the seed and named under the kept memories."""
    fixed = estimate_tokens(render_prompt(P, "navigate_layout", critical="", seed="", results="", earlier="", **pieces))
    rendered = Rendered()
    out = _Out(g, _room(ctx.max_prompt_tokens - fixed), rendered)
    log = state.get("mra_tool_log") or []
    critical = state.get("critical_memories") or []
    kept_lines, cut, in_seed = _critical_after_seed(out, critical, state.get("mra_seed") or {})
    seed = _seed(out, state.get("mra_seed") or {})
    in_view = [m["id"] for m in critical if m["id"] in in_seed and m["id"] in rendered.shown_turns]
    cut += [m["id"] for m in critical if m["id"] in in_seed and m["id"] not in rendered.shown_turns]
    if in_view:
        out.text(kept_lines, f"(also kept, shown in the seed above: {', '.join(in_view)})")
    if cut:
        out.text(kept_lines, f"(kept, not shown for lack of room: {', '.join(cut)})")
    results = _results(out, log, state.get("iteration", 0))
    earlier = _earlier(out, log, state.get("iteration", 0), oldest_first=True)
    rendered.prompt = render_prompt(P, "navigate_layout", critical="\n".join(kept_lines) or "(none yet)", seed=seed,
                                    results=results, earlier=earlier, **pieces)
    return _finish(rendered)


def navigate_prompt(state: MRAgentState, ctx: MRAgentContext, g: CueTagGraph) -> Rendered:
    """The navigate prompt: H, seed, newest results turn by turn, earlier calls — all under one hard budget
    (in the order of `mra_prefix_layout`)."""
    it = state.get("iteration", 0)
    total = state.get("mra_calls_total", 0)
    calls_left = max(0, ctx.mra_max_calls_total - total)
    dropped = state.get("mra_dropped_calls") or []
    notices = ""
    if dropped:
        notices = "Calls not run last round:\n" + "\n".join(f"- {call_text(d)}: {d['reason']}" for d in dropped) + "\n"
    protocol, tools = _protocol(ctx)
    pieces = dict(question=state["question"], round=it + 1, max_rounds=ctx.mra_max_rounds, calls_left=calls_left,
                  per_round=min(ctx.mra_max_calls_per_round, calls_left), notices=notices, tools=tools,
                  protocol=protocol, answer_rules=load_prompt(P, "answer_rules"))
    if ctx.mra_prefix_layout:
        return _navigate_layout(state, ctx, g, pieces)
    fixed = estimate_tokens(render_prompt(P, "navigate", critical="", seed="", results="", earlier="", **pieces))
    rendered = Rendered()
    out = _Out(g, _room(ctx.max_prompt_tokens - fixed), rendered)
    log = state.get("mra_tool_log") or []
    critical = _critical(out, state.get("critical_memories") or [])
    seed = _seed(out, state.get("mra_seed") or {})
    results = _results(out, log, it)
    earlier = _earlier(out, log, it)
    rendered.prompt = render_prompt(P, "navigate", critical=critical, seed=seed, results=results, earlier=earlier,
                                    **pieces)
    return _finish(rendered)


def final_prompt(state: MRAgentState, ctx: MRAgentContext, g: CueTagGraph) -> Rendered:
    """The forced final prompt: H first, then tool results newest round first (raw turns, dates,
    persona facts), then the seed — as much as fits."""
    rendered, lines = final_evidence(state, ctx, g)
    rendered.prompt = render_prompt(P, "final_answer", evidence="\n".join(lines) or "(none)",
                                    question=state["question"], answer_rules=load_prompt(P, "answer_rules"))
    return rendered


def final_evidence(state: MRAgentState, ctx: MRAgentContext, g: CueTagGraph) -> tuple[Rendered, list[str]]:
    """The forced final prompt's memory lines under its budget (no prompt text yet), and what they show."""
    pieces = dict(question=state["question"], answer_rules=load_prompt(P, "answer_rules"))
    fixed = estimate_tokens(render_prompt(P, "final_answer", evidence="", **pieces))
    rendered = Rendered()
    out = _Out(g, _room(ctx.max_prompt_tokens - fixed), rendered)
    lines: list[str] = []
    cut: list[str] = []
    for m in state.get("critical_memories") or []:
        if m["id"] in g.turns and not out.turn(lines, m["id"], g.raw_line(m["id"])):
            cut.append(m["id"])
    log = [e for e in state.get("mra_tool_log") or [] if not e.get("error")]
    for rnd in sorted({e["round"] for e in log}, reverse=True):
        for entry in (e for e in log if e["round"] == rnd):
            _entry(out, entry, lines, derived=entry["tool"] in EVIDENCE_TOOLS)
    seed = state.get("mra_seed") or {}
    for key in SEED_SECTIONS:
        for line in seed.get(key) or []:
            tid = turn_of(line.split(": ", 1)[0], g.turns)
            if tid is not None and not out.turn(lines, tid, line):
                rendered.not_shown.append(tid)
    rendered.not_shown += cut
    return _finish(rendered), lines


def shown_update(state: MRAgentState, shown: Rendered) -> dict[str, Any]:
    """State fields for what a prompt rendered: masks, visible ids, evidence lines (new turns only)."""
    masks = set(state.get("masks") or [])
    new = [(t, line) for t, line in zip(shown.shown_turns, shown.evidence, strict=True) if t not in masks]
    return {
        "masks": [t for t, _ in new],
        "shown_turn_ids": [t for t, _ in new],  # the same turns, named in the node's trace record too
        "mra_visible_ids": shown.visible,
        "evidence": list(state.get("evidence") or []) + [line for _, line in new],
        "retrieved": [{"id": t, "text": line} for t, line in new],
    }
