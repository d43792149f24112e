"""HyMem's settings (README.md in this folder lists each with its paper value).

Settings marked "set at ingest" shape the memory that ingestion builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from recollect.settings import Context, setting


@dataclass(kw_only=True)
class HyMemSettings:
    """HyMem's own hyper-parameters (`hymem_*`)."""

    # Issue 35 (the spec's 10 = paper): the light call's 10 Level-1 units (about 30 tokens each) were a quarter
    # of the prompt rag's answer call reads (5 chunks of about 256 tokens), and HyMem's largest leak is
    # retrieval: the gold turns its prompts show were 9 points below rag's. 30 units put the light call near
    # rag's budget. On 24 decisive questions: gold turns shown 47 -> 58 %, F1 +2.6 [-7.2, +13.4], 550 more
    # prompt tokens per question (benchmarks/reports/eval_decisive/hymem_light_k30.md).
    hymem_light_k: int = setting(30, "HyMem: summaries shown to the light answer", ge=1, paper=10)
    # Issue 35: on the decisive rows HyMem's light path lost 13 F1 points to rag on the same questions (78
    # questions: 33.8 against 47.0): a summary written by the 1.5B model drops the date, name or object the
    # question asks for, or attaches it to the wrong person, and the light call answers from those words alone;
    # and ranking summaries reaches fewer gold turns than ranking turns (no model, 119 questions: the raw turns
    # of the best summaries hold 41 % of the gold turns within 1,280 tokens, the best turns by cosine and BM25
    # fused 70 % with their session headers). >0: the light call reads the best-ranked turns, grouped by session
    # under its date, within this many tokens of memory (1280 = rag's answer prompt, 5 chunks of 256 tokens:
    # both compared at the same answer-prompt budget; light_turns.py) and cites turn ids; `hymem_light_k` is
    # then unused, and the deep path still selects summaries. 0 = the spec (the top `hymem_light_k` summaries).
    hymem_light_turn_tokens: int = setting(
        1280, "HyMem: the light call reads the best-ranked turns, grouped by session, within this many tokens "
              "of memory (0 = the top hymem_light_k summaries only, the spec)", ge=0, paper=0)
    hymem_deep_n: int = setting(30, "HyMem: Level-1 summaries the deep path selects from", ge=1)
    hymem_deep_batch: int = setting(50, "HyMem: summaries per deep selection batch (d)", ge=1)
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
        4, "HyMem: turns per required summary item at ingest; 0 = no density check", ge=0, paper=0)
    # Improvement (spec: an item links whatever turns the model lists): one sentence cannot carry a whole
    # session, yet the 1.5B model at times lists every turn id of a session for a one-line gist ("Jon and
    # Gina are discussing their plans"), which marks the whole session as summarised, so none of its turns
    # is added as a turn line and only the gist is searchable (dev slice: an item listed 12-23 turns in 4 of
    # 6 sessions on the xllamacpp runtime, 3 of them left with one searchable line; 1 of 6 on
    # llama-cpp-python). An item keeps at most this many of the turns it lists, those most similar to its
    # text; the others are then linked by no item and get their own turn line. 0 = the spec (no cap).
    hymem_max_turns_per_item: int = setting(
        8, "HyMem: turns one summary item may link at ingest (most similar kept); 0 = no cap", ge=0, paper=0)
    # Issue 35 (spec: the summary call's reply is free JSON). The 1.5B model wrote one gist for most sessions
    # even after the density retry, listed the prompt's placeholder as turn ids, or ran to its token limit
    # and fell back, so most turns were linked by no summary. True: the schema sent (a grammar on llama.cpp)
    # asks for the items the density check wants (up to 4 more), each with 1 to `hymem_max_turns_per_item`
    # ids among the session's own turns (summaries.py in this folder). False = the unbounded schema.
    hymem_bounded_summaries: bool = setting(
        False, "HyMem: the summary call's schema asks for the density check's number of items, each linked to "
               "1 to hymem_max_turns_per_item of the session's own turn ids (false = unbounded); set at ingest")
    # Issue 35 (spec: Level-1 retrieval is dense only). On the decisive eval's first hymem rows the light path
    # showed fewer gold turns than rag (51 % against 62 % on 12 questions), whose chunk memory fuses BM25
    # with the dense ranking; names, places and numbers are where a 384-dimension embedding of a short line
    # is weakest. "hybrid": the light and deep paths rank the Level-1 units by dense and BM25 ranks fused
    # (`recollect.memory.retriever.MaskedRetriever`, as `memr3_rerank`). "none" = the spec.
    hymem_rerank: Literal["none", "hybrid"] = setting(
        "none", "HyMem: rank Level-1 units by dense and BM25 fused (hybrid) or by cosine only (none, the spec)")
    # Issue 35: HyMem's largest leak on the decisive eval is retrieval (its top Level-1 units reach 51 % of the
    # gold turns, rag's chunks 56 %; temporal 58 % against 84 %): a summary is an abstraction, and the date,
    # name or object a question asks about is often in a turn it links but not in its own words. True: the
    # units are taken in turn from two rankings, their summary's cosine (first) and their best linked turn's
    # rank (cosine and BM25 fused over the conversation's turns, which ingestion stores for every method), so
    # about half of the units shown are those whose turns match best; the prompts show the same unit lines.
    # (Fused by reciprocal rank instead, a unit matched only by its turn lost to units ranked fairly on both.)
    # With the turns ranked by cosine alone, 47 decisive questions: F1 +0.06 [-6.1, +5.0], gold turns shown
    # 45 -> 49 %; offline the fused turn ranking reaches 51 % of the gold turns with 10 units, cosine 45 %,
    # the spec 38 %. False = the spec.
    hymem_turn_ranking: bool = setting(
        False, "HyMem: take Level-1 units in turn from the summaries' ranking and their best linked turn's "
               "(false = the spec's summary similarity only)")
    # Improvement (spec: light supports are every turn linked from the k shown summaries): the light
    # call cites the summary ids it used and its supports are their turns. "all_shown" = the spec.
    hymem_light_supports: Literal["cited", "all_shown"] = setting(
        "cited", "HyMem: light supports are the cited summaries' turns or every shown one", paper="all_shown")
    # Improvement (spec: a light answer judged sufficient is final): a Level-1 summary written by a small
    # model can misattribute or invent a fact, so a light answer must also be found in the raw turns its
    # cited summaries link to (their text and date, not the speaker label: "Theo" read off a summary of
    # Theo's question is not grounded); otherwise the round escalates to deep, which reads the sessions.
    # false = the spec.
    hymem_light_grounding: bool = setting(
        True, "HyMem: escalate to deep when a light answer is not found in the turns of its summaries", paper=False)
    # Improvement (spec: light answers "completely", deep lists every plausible answer): ask both for a
    # short phrase copied from the memory, as the baselines do; long free-form answers lower token F1
    # and the 1.5B model mixes people up in them. "full" = the spec's wording.
    hymem_answer_style: Literal["short", "full"] = setting(
        "short", "HyMem: short copied phrase or the spec's full answer", paper="full")
    # Issue 35 (spec: the answer is the module's reply). On the decisive rows (120 questions at a3f1bd28) HyMem
    # showed more gold turns than rag (77 against 70 %) and its answers cited more (46 against 35 %), yet scored
    # 8 points below it: the light answers ran to 13 words (median 6) against the short style's request, whole
    # turns copied ("I was out walking in my neighborhood when ..."), which LoCoMo-F1 scores low. True: one more
    # call rewrites the answer into a short span with absolute dates, shown the turns it rests on (the shared
    # rewrite of MGRetrieval's last step and MRAgent's mra_answer_rewrite, recollect.answer_rewrite); an answer
    # of at most `hymem_rewrite_skip_words` words with no digit is kept as it is, with no call.
    # Measured on 120 decisive questions: +0.30 [-0.51, +1.08] F1 for 0.8 calls more a question (the 1.5B model
    # copies sentence drafts back unchanged; hymem_answer_rewrite.md). Off since hymem_final_answer_tokens.
    hymem_answer_rewrite: bool = setting(
        False, "HyMem: rewrite the answer into a short span with one more call (false = the spec)")
    # Issue 35 (spec: the draft of the last round is the answer). HyMem's rows show more gold turns than rag's
    # and cite more, yet score lower: its answer steps lose what it found (the rewrite above did not recover
    # it). >0: one last call writes the answer as rag does, with the baselines' prompt and turn lines, from the
    # turns HyMem's rounds showed (the draft's supports first, then the rest ranked for the question) within
    # this many tokens (1280 = rag's five chunks of 256: the same answer-prompt budget); the draft stands when
    # that call gives no answer (recollect.turn_answer). 0 = the spec.
    hymem_final_answer_tokens: int = setting(
        1280, "HyMem: one last call answers as rag does from the turns HyMem showed, the draft's supports first, "
              "within this many tokens of turns (0 = the draft is the answer, the spec)", ge=0, paper=0)
    # Issue 34: in rag's own prompt the final answer call re-sends every turn it reads, and a CPU server computes all
    # of it again (1,800 prompt tokens a question on the decisive rows), though the light or deep call before it held
    # most of them. True: it continues the last of those exchanges instead (its messages and reply unchanged, so the
    # server's cache serves them) with one message of rag's answer rules and only the picked turns that call did not
    # show (recollect.turn_continue), as MRAgent's and MGRetrieval's final calls do. False = rag's own prompt; a reply
    # that needed its retry, or a continuation past the runtime's window, uses it too.
    # Off: measured on MRAgent's final call, the continuation answered clearly worse than rag's own prompt
    # (graphs/mragent/README.md); not yet measured here.
    hymem_final_answer_continues: bool = setting(
        False, "HyMem: the final answer call continues the last light or deep exchange with one new message holding "
               "the turns it did not show (false = rag's own answer prompt with every turn)")
    hymem_rewrite_skip_words: int = setting(
        3, "HyMem: skip the answer rewrite for answers of at most this many words with no digit (0 = never skip)",
        ge=0, paper=0)

    # Prompt layout for prefix reuse (no paper setting: the paper's prompts are the "false" layout). On a
    # CPU a call costs its prompt's prefill, and llama.cpp reuses the longest common prefix with the slot's
    # previous prompt. True: every call of a question sends the same system message, then the question and
    # the call's memory, then the step's task (layout.py in this folder), so the deep selection reuses the
    # light call's question and summaries (the same ranking, numbered alike); each call sees what it saw
    # before. False = the paper's prompts (instructions first), byte for byte.
    # Default false since 2026-11-27: not yet measured on the model, and with it on HyMem answered an easy
    # question of tests/methods/hymem/test_local.py wrongly (the question's own name instead of the answer).
    hymem_prefix_layout: bool = setting(
        False, "HyMem: lay out the light, selection, deep answer and reflect prompts as one shared prefix (frame, "
              "question, memory) and a per-step task, so a server's prompt cache reuses the light call's "
              "summaries in the selection (false = the paper's prompts)")


@dataclass(kw_only=True)
class HyMemContext(HyMemSettings, Context):
    """The `hymem` graph's runtime settings: the shared ones plus HyMem's."""
