"""MemR3's settings (README.md in this folder lists each with its paper value).

The chunk memory's settings (chunk size, candidate pool, reranking) are shared with the rag
baseline and live in recollect.memory.chunks.ChunkSettings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from recollect.memory.chunks import ChunkSettings
from recollect.settings import Context, setting


@dataclass(kw_only=True)
class MemR3Settings:
    """MemR3's own hyper-parameters (`memr3_*`)."""

    # Issue 34 (paper: 5). On the decisive tape of ce2f8f21 the questions that used all 5 router calls (13 of 95)
    # took about 53 s and 6,200 computed prompt tokens each, three retrievals of about 1,400 tokens, and scored
    # below rag on them (30.0 against 38.3 F1). At 3 the third call is the budget call, skipped
    # (memr3_skip_forced_router), and the answer reads two retrievals' turns: on 108 decisive questions F1
    # -0.16 [-2.2, +1.9], computed prompt tokens 2,403 -> 2,268 and calls 2.69 -> 2.44 a question
    # (benchmarks/reports/eval_decisive/memr3_max_iterations3.md). At 2 (since 2026-11-29) one router call
    # decides, its retrieval's turns go to the answer, and the second (budget) call is skipped: on 120 decisive
    # questions F1 -0.39 [-2.66, +1.75] against 3, computed prompt tokens 2,282 -> 1,907, completion tokens
    # 233 -> 210 and calls 2.45 -> 2.23 a question (memr3_max_iterations_2.md).
    memr3_max_iterations: int = setting(2, "MemR3: router calls per question (n_max)", ge=1, le=50, paper=5)
    memr3_max_reflect_streak: int = setting(
        1, "MemR3: reflect decisions in a row before retrieval is forced (n_cap)", ge=0)
    memr3_max_retrieval_attempts: int = setting(
        0, "MemR3: retrievals per question; 0 = same as memr3_max_iterations", ge=0)
    memr3_top_k: int = setting(5, "MemR3: chunks shown per retrieval", ge=1)
    # Improvement (spec: the answer call sees the evidence bullets and the draft only, = "never"): also
    # show it the conversation turns behind them: the latest retrieval's snippets plus the turns the
    # evidence cites. "when_thin" only when the evidence cites no shown turn or the router fell back.
    # Default "always": the first retrieval is RAG's, so the answer call then sees at least what RAG's
    # does (evidence-only measured 0.0 F1 against RAG's 0.33 on the memr3_vs_rag slice).
    # "all" (issue 35): every retrieval's snippets, the latest first, then the cited turns, to the prompt
    # budget: a re-retrieval masks what was shown, so with "always" the answer call of a question that looped
    # no longer sees the first retrieval's turns (rag's) unless the evidence cites them. Default "all" since
    # 2026-11-28 (with memr3_answer_continues, which adds the earlier retrievals' turns to its new message, the
    # question's own search first): on 79 decisive questions +4.8 [+1.1, +9.4] F1 over "always"; on the
    # 17 questions that looped 12.4 -> 34.6 (benchmarks/reports/eval_decisive/memr3_answer_all.md).
    memr3_answer_snippets: Literal["never", "when_thin", "always", "all"] = setting(
        "all", "MemR3: show the answer call the turns behind the evidence: the latest retrieval's (always), "
                  "every retrieval's (all), only when the evidence is thin, or none (never = the spec)",
        paper="never")
    # Issue 35 (spec: the answer call reads the evidence bullets and the draft, = "text"). On the decisive rows
    # the 1.5B router's bullets are often a whole turn copied from the wrong session, and an answer call shown
    # both the turns and those bullets took the bullet's date or detail over the turns'. "ids": when the
    # answer call sees turns, it sees the turns the bullets cite, not the bullets' wording or the draft; the
    # tracker still steers retrieval and picks the cited turns. With no turns shown the bullets are shown.
    memr3_answer_notes: Literal["text", "ids"] = setting(
        "text", "MemR3: the answer call reads the evidence bullets and the draft (text, the spec) or, when it sees "
                "turns, only the turns the bullets cite (ids)")
    # Improvement (spec: the router's evidence list replaces the old one wholesale): bullets citing a
    # shown turn that the router dropped are carried over (at most 6), so multi-hop facts found in an
    # earlier iteration reach the answer call. False = the spec's wholesale replacement.
    memr3_keep_cited_evidence: bool = setting(
        True, "MemR3: carry over evidence bullets citing a shown turn that the router dropped", paper=False)
    # Improvement (spec: the answer call's reply is final): when the answer call says "No information
    # available" but the router's draft answer is grounded (its words occur in the shown turns or
    # evidence), the draft is the answer. False = the spec.
    memr3_prefer_grounded_draft: bool = setting(
        True, "MemR3: use the router's grounded draft when the answer call finds nothing", paper=False)
    # Improvement (spec: the answer call's reply is final): one more call rewrites the answer into a short
    # span with absolute dates (graphs/answer_rewrite.py, as MRAgent's `mra_answer_rewrite`). The 1.5B
    # model's MemR3 answers keep relative times and ISO dates ("last week", "2023-05-25"), which
    # LoCoMo-F1 scores 0 against "9 June, 2023". Measured on the dev slice: 32.66 -> 34.01 LoCoMo-F1, but
    # only 2 of 16 answers changed, both by copying the rewrite prompt's example, so the default stays off
    # (benchmarks/reports/eval_dev_memr3_rewrite/).
    memr3_answer_rewrite: bool = setting(
        False, "MemR3: rewrite the answer into a short span with one more call (false = spec)")

    # Issue 34 (no paper setting: the paper's prompts are the "false" layout). On a CPU a call costs its
    # prompt's prefill, and llama.cpp reuses the longest common prefix with the slot's previous prompt.
    # True: every call of a question sends the same system message, then the question and the latest
    # retrieval's turns, then the step's own task (layout.py in this folder); each call sees what it saw
    # before. False = the paper's prompts, byte for byte.
    # Default false since 2026-11-27: on the model its router retrieved more often than the paper layout's
    # (3.1 calls per question against 2.6 on the decisive eval's first rows) and it answered an easy question
    # of tests/methods/memr3/test_local.py wrongly; kept as a setting until measured on 60 common questions.
    memr3_prefix_layout: bool = setting(
        False, "MemR3: lay out the router and answer prompts as one shared prefix (frame, question, latest turns) "
              "and a per-step task, so a server's prompt cache reuses the prefix (false = the paper's prompts)")
    # Issue 34 (no paper setting: the paper's answer call is a new prompt, = false). In the paper layout the
    # answer call re-sends the turns the router has just read, so its prompt (about 1,500 tokens) is computed
    # a second time. True: after a router call that chose answer, the answer call continues that exchange: the
    # router's messages, its reply (evidence, gaps, draft) as the assistant's turn, then one user message with
    # the answer instructions, any turns and notes the answer call would see that the router was not shown,
    # and the question. The server's prompt cache then computes only that last message. Used only where the
    # answer call reads the turns and the notes (memr3_answer_snippets not never, memr3_answer_notes text) in
    # the paper layout; otherwise, or after a retried or skipped router call, the answer call is as before.
    # Default true since 2026-11-28, with memr3_reply_bounds and memr3_stable_router_system: on 56 decisive
    # questions computed prompt tokens 4,568 -> 2,176 a question, F1 -3.3 [-10.7, +3.6]
    # (benchmarks/reports/eval_decisive/memr3_prompt_reuse.md).
    memr3_answer_continues: bool = setting(
        True, "MemR3: the answer call continues the router's last exchange (its prompt and reply) with the answer "
               "instructions, so a prompt cache computes only the new message (false = the paper's answer prompt)", paper=False)
    # Issue 34 (spec: no length limits; our schema's caps were 6 bullets of 300 characters, 6 gaps of 200, texts of
    # 200 to 300). A router reply is decoded token by token, about 12 a second on a CPU. True: the grammar allows
    # 6 bullets of 160 characters, 3 gaps of 100, a query of 120, a draft of 160 and reasoning of 200 (router.py,
    # BOUNDED_*): room for a fact with its turn id and date, not for a copied turn. False = the earlier caps.
    memr3_reply_bounds: bool = setting(
        True, "MemR3: tighter length caps on the router's reply (6 bullets of 160 characters, 3 gaps of 100, short "
               "texts), so it decodes fewer tokens (false = the earlier caps)", paper=False)
    # Issue 34 (spec: the forced decision is announced with the router's instructions, = false). In the paper layout
    # the decision directive sits in the router's system message, before the snippets, so a call after `reflect`
    # (forced to retrieve, same snippets) shares only the instructions before the directive with the call before
    # it (about 160 tokens) and computes the snippets again. True: the system message always holds the normal
    # directive, and a forced decision's directive ends the user message (`forced_note`); the schema's enum still
    # allows only the forced decision. The call after `reflect` then reuses the system message and the snippets.
    # Issue 34 (spec: one reply object with every field optional). On the decisive tapes (152 router replies at
    # main's defaults, 2026-11-28) the 1.5B model wrote the fields of other decisions beside its own: a
    # retrieval_query on a reflect or answer decision, a reasoning on an answer. About 56 of a reply's 112 tokens
    # went to fields the graph never reads. True: where a grammar holds the reply to its schema, the schema has
    # one branch per allowed decision with only the text field that decision reads (retrieve: retrieval_query,
    # reflect: reasoning, answer: detailed_answer) beside the evidence and gaps lists.
    memr3_decision_fields: bool = setting(
        True, "MemR3: the router's reply schema lets each decision write only the text field it reads, so a "
              "grammar-held reply decodes no unread field (false = every field optional, as the spec)", paper=False)
    memr3_stable_router_system: bool = setting(
        True, "MemR3: keep the router's system message the same on every call and say a forced decision at the end "
               "of the user message, so a prompt cache reuses the snippets after reflect (false = the spec's layout)", paper=False)
    # Issue 34: the last allowed router call is forced to answer, so its decision is known before it is made;
    # with memr3_answer_snippets = always (or all) the answer call reads the same latest turns and the evidence so far
    # itself. True: that router call is not made (the trace's router record says skipped_call and why); the
    # answer call follows directly. False = the paper's calls.
    memr3_skip_forced_router: bool = setting(
        False, "MemR3: skip the router call the iteration budget forces to answer when the answer call reads the "
              "same turns (memr3_answer_snippets always or all); false = the paper's calls")

    # Improvement (spec: the router writes the evidence and gaps lists at every step; our schema only made
    # `decision` required). llama.cpp's JSON grammar puts required properties first and lets optional ones
    # be left out, so the 1.5B model wrote `decision` first and skipped both lists: on the decisive eval's
    # first memr3 question all 7 router replies had no evidence and chose retrieve, so the tracker stayed
    # empty, the loop ran to its budget, and the answer call saw only the last (masked, weakest) retrieval.
    # True: the schema requires evidence, then gaps, then decision, so the decision follows the lists it
    # should rest on. False = the earlier schema (decision required only).
    # Default false until measured: with it on (and the prefix layout) F1 was not shown equal on the first
    # 10 decisive questions (-6.8 [-32.5, +18.0]).
    memr3_require_tracker: bool = setting(
        False, "MemR3: the router's reply schema requires the evidence and gaps lists before the decision "
              "(false = only the decision is required)")

    # Issue 34, item 3 (spec: an answer decision is always followed by the answer call). On the model the
    # router chose answer in 23 of 38 calls of the decisive eval's first questions and never wrote its
    # optional draft (a grammar lets it skip the field), so every question paid a second call of about the
    # router's size to state the answer. True: when the router may answer, its schema requires a draft after
    # the decision; an answer decision whose draft is found in the evidence and turns the router was shown
    # (half its words or more) is the answer, with no answer call (the trace says so); any other draft goes
    # to the answer call as before. False = the paper's calls.
    memr3_answer_from_router: bool = setting(
        False, "MemR3: an answer decision whose required draft is found in the evidence and turns shown is the "
               "answer, with no answer call (false = the paper's answer call)")

    @property
    def memr3_retrieval_budget(self) -> int:
        return self.memr3_max_retrieval_attempts or self.memr3_max_iterations


@dataclass(kw_only=True)
class MemR3Context(MemR3Settings, ChunkSettings, Context):
    """The `memr3` graph's runtime settings: the shared ones plus MemR3's and the chunk memory's."""
