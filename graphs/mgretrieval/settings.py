"""MGRetrieval's settings (README.md in this folder lists each with its paper value).

Settings marked "set at ingest" shape the vocabulary that ingestion builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from recollect.settings import Context, setting


@dataclass(kw_only=True)
class MGRetrievalSettings:
    """MGRetrieval's own hyper-parameters (`mg_*`)."""

    mg_depth: int = setting(4, "MGRetrieval: pyramid levels (maximum query keywords)", ge=1, le=10)
    mg_max_rounds: int = setting(4, "MGRetrieval: retrieval rounds", ge=1, le=20)
    # 30 since 2026-11-28 (issue 35; 20 before, the spec's value; the paper sets no cap), with mg_dense_fill 30: see
    # mg_dense_fill.
    mg_max_new_per_round: int = setting(30, "MGRetrieval: new memories added per round", ge=1, paper=20)
    mg_max_critical: int = setting(10, "MGRetrieval: critical memories kept for the answer", ge=1)
    mg_keywords_per_memory: int = setting(8, "MGRetrieval: keywords extracted per memory at ingest", ge=1)
    mg_match_shortlist: int = setting(5, "MGRetrieval: vocabulary entries shortlisted per query keyword", ge=1)
    mg_match_min_sim: float = setting(0.6, "MGRetrieval: cosine similarity a vocabulary match needs", ge=-1, le=1)
    mg_select_candidates: int = setting(50, "MGRetrieval: vocabulary candidates shown to keyword selection", ge=1)
    mg_empty_fallback: Literal["dense", "none"] = setting(
        "dense", "MGRetrieval: dense retrieval when no keyword group matches (dense) or nothing")
    mg_rewrite_with_question: bool = setting(True, "MGRetrieval: the rewrite call also sees the question", paper=False)
    # Issue 35 (spec: a turn's keywords are the model's reply as it is). In the 1.5B model's replies most
    # keywords shared no word with their turn: a turn's row repeated its neighbour's, or the prompt's subject
    # (on a cached conv-30 build, 37 % of keywords had a word of their turn). True keeps only keywords that
    # share a content word with the turn and tops a turn up to `mg_grounded_minimum` with its own words.
    mg_keyword_grounding: bool = setting(
        False, "MGRetrieval: keep only extracted keywords that share a word with their turn, topped up with the "
               "turn's own words (false = spec); set at ingest")
    mg_grounded_minimum: int = setting(
        3, "MGRetrieval: with mg_keyword_grounding, the keywords a turn is topped up to with its own words",
        ge=0)
    mg_keep_surface_forms: bool = setting(
        False, "MGRetrieval: keep keywords' surface forms instead of normalising them")
    # --- mg_ingest_format (issue 12) ---
    # Improvement (spec: keyed JSON replies at ingestion): "compact" asks for {turn number: keywords} and
    # {candidate number: entry number}, no repeated keys and no echoed keyword text (decode dominates the
    # CPU model's ingestion time); "json" = the spec's keyed objects. Both shapes are parsed in either mode.
    mg_ingest_format: Literal["compact", "json"] = setting(
        "compact", "MGRetrieval: ingestion reply format (compact: numbered keys and entry numbers; json: the spec's keyed objects)", paper="json")
    # --- end mg_ingest_format ---
    # Improvement (spec: the paper's pyramid order): a group of speaker names only (Φ ≈ half the
    # conversation) turns its round into dense top-k retrieval over that speaker's turns; "last" visits
    # such groups after every other group, "in_order" is the spec.
    mg_speaker_only_groups: Literal["last", "in_order"] = setting(
        "last", "MGRetrieval: where keyword groups made only of speaker names go in the pyramid (in_order = spec)", paper="in_order")
    # --- MGRetrieval retrieval-round improvements (graphs/mgretrieval/DESIGN.md, "Retrieval rounds"); each
    # deviates from the spec, whose behaviour is one value away. The 1.5B model called round 1
    # sufficient on thin evidence every time, and narrow keyword groups showed ~9 turns.
    mg_assess_grounding: bool = setting(
        True, "MGRetrieval: accept 'sufficient' only when the draft answer is found in the memories shown "
              "(H and this round's new ones); a 'no information' draft is never sufficient (false = spec)", paper=False)
    # 20 since 2026-11-27 (issue 35; 10 before): with the fused turn ranking below, on the decisive eval's 25
    # questions the gold turns shown went 45 -> 54 % (rag 54 % on the same 31 questions), F1 -3.3 [-14.4, +6.7]
    # (benchmarks/reports/eval_decisive/mgretrieval_fill20.md); a narrow group's round showed 10 turns, rag 22.
    # 30 since 2026-11-28 (issue 35), with a per-round cap of 30: at main's defaults the assess prompts showed 59.5 %
    # of the gold turns on the 120 decisive questions, rag 70.2 %, since a keyword group and its fill hold about 22
    # turns a round (rag shows 23). Offline, over those rows' turns and the built memory, a round of 30 (the group's
    # best by the fused ranking, then the question's nearest turns) holds 68.1 % (25: 64.7 %; 20: 57.9 %);
    # measured on the model: graphs/mgretrieval/README.md.
    mg_dense_fill: int = setting(
        30, "MGRetrieval: top a keyword group with fewer new memories up to this many with the question's "
            "nearest unmasked turns, within mg_max_new_per_round (0 = spec)", ge=0, paper=0)
    mg_exhausted_fallback: Literal["dense", "stop"] = setting(
        "dense", "MGRetrieval: when the pyramid runs out before the round budget, go on with rounds of the "
                 "question's nearest unmasked turns (dense) or stop (stop = spec)", paper="stop")
    # Issue 35: the decisive rows' funnel showed a round's cut (per-round cap, dense fill, prompt budget)
    # as where MGRetrieval falls below rag. Offline, over the decisive sample's 119 questions with gold
    # turns and the built memory, the question's 20 first turns by cosine held 53.6 % of the gold turns,
    # by cosine + BM25 rank fusion 64.5 % (benchmarks/reports/turn_ranking). On the model, alone (fill 10):
    # shown 45 -> 46 %, F1 -5.3 [-16.9, +4.4] on 25 questions; with a fill of 20, above.
    mg_turn_ranking: Literal["cosine", "hybrid"] = setting(
        "hybrid", "MGRetrieval: rank a round's candidate turns (per-round cap, dense fill and rounds, prompt "
                  "budget cut) by cosine to the question (cosine = spec) or by cosine and BM25 ranks fused "
                  "(hybrid)", paper="cosine")
    mg_keep_critical_when_none: bool = setting(
        True, "MGRetrieval: a reply naming no shown memory keeps H(r-1) and the new memories, cut by "
              "similarity, instead of an empty H (false = spec)", paper=False)
    mg_rewrite_keep_draft: bool = setting(
        True, "MGRetrieval: keep the draft when the rewrite says 'no information' but the draft answers "
              "(false = spec)", paper=False)
    # Issue 35 (spec: the rewrite p_r3 turns the last round's draft into the answer). On the 120 decisive questions
    # (fa6cb202) MGRetrieval's rounds brought in 69.0 % of the gold turns, as many as rag retrieves (70.2 %), but its
    # assess prompts showed 59.5 % and it scored 6.3 F1 points below rag: a round shows a keyword group's best 30 turns
    # and stops at the first grounded draft, and the rewrite reads only the kept memories. >0: one last call writes
    # the answer as rag does (recollect.turn_answer: the baselines' prompt and turn lines, a 120-token reply) from
    # the turns the rounds showed and those their groups brought in, the kept memories (the draft's evidence) first,
    # then the rest ranked for the question by cosine and BM25 fused, within this many tokens (1280 = rag's five
    # chunks of 256). It replaces the rewrite, which runs only when this call gives no answer. 0 = the spec.
    mg_final_answer_tokens: int = setting(
        1280, "MGRetrieval: one last call answers as rag does from the turns the rounds showed and brought in, the "
              "kept memories first, within this many tokens of turns; the rewrite runs only when it gives no "
              "answer (0 = the spec's rewrite)", ge=0, paper=0)
    # Issue 34: in rag's own prompt the final answer call re-sends every turn it reads, and a CPU server computes
    # all of it again (about 1,300 prompt tokens a question), though the last assess prompt held most of them.
    # True: it continues the last assess exchange instead (that prompt and reply unchanged, so the server's cache
    # serves them) with one message of rag's answer rules and only the picked turns that prompt did not hold
    # (recollect.turn_continue), as MRAgent's final answer call continues its navigate exchange. False = rag's own
    # prompt; a continuation that would not fit the runtime's window, or after an assess reply that needed its
    # retry, uses it too.
    # Off: measured on MRAgent's final call, the continuation answered clearly worse than rag's own prompt
    # (graphs/mragent/README.md); not yet measured here.
    mg_final_answer_continues: bool = setting(
        False, "MGRetrieval: the final answer call continues the last assess exchange with one new message holding "
               "the turns it did not show (false = rag's own answer prompt with every turn)")
    # --- end of the MGRetrieval retrieval-round improvements


@dataclass(kw_only=True)
class MGRetrievalContext(MGRetrievalSettings, Context):
    """The `mgretrieval` graph's runtime settings: the shared ones plus MGRetrieval's."""
