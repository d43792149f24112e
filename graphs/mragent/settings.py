"""MRAgent's settings (README.md in this folder lists each with its paper value).

`ToolProtocol` is how tool calls travel: native tool calls, the JSON protocol, or chosen by endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from recollect.settings import Context, ToolProtocol, setting


@dataclass(kw_only=True)
class MRAgentSettings:
    """MRAgent's own hyper-parameters (`mra_*`)."""

    # Issue 34 (the paper: 8). On the decisive rows (37 questions, 2026-11-28) the 1.5B model's second round ran
    # no tool call in any question: every call it wrote repeated one of round 1 (mra_stop_on_repeat then ended the
    # loop), and the round cost 12.6 s a question (724 prompt tokens computed, 180 written). With 2, round 1's
    # calls run and their results go to the final answer call, which reads them as round 2's prompt did.
    mra_max_rounds: int = setting(
        2, "MRAgent: LLM rounds in the tool loop, the forced final one included", ge=1, le=50, paper=8)
    mra_max_calls_per_round: int = setting(10, "MRAgent: tool calls executed per round", ge=1)
    mra_max_calls_total: int = setting(50, "MRAgent: tool calls per question", ge=1)
    mra_k1: int = setting(80, "MRAgent: coarse candidate cap (K1)", ge=1)
    mra_k2: int = setting(20, "MRAgent: fine candidate cap (K2)", ge=1)
    mra_tag_max: int = setting(15, "MRAgent: tags considered per cue expansion", ge=1)
    mra_tag_keep: int = setting(10, "MRAgent: tags kept after scoring", ge=1)
    mra_tag_expand_threshold: float = setting(0.7, "MRAgent: tag score needed to expand a tag", ge=0, le=1)
    mra_time_event_limit: int = setting(50, "MRAgent: events returned by a time-window lookup", ge=1)
    mra_topic_k: int = setting(8, "MRAgent: topics returned by a topic search", ge=1)
    mra_tool_event_cap: int = setting(20, "MRAgent: events returned by one tag or topic tool call", ge=1)
    mra_jaccard: float = setting(0.6, "MRAgent: Jaccard similarity for a partial cue match", ge=0, le=1)
    # Issue 34 (spec: "llm_union", the union of an LLM pick and an LLM score of the K1 candidates). The two calls
    # read every candidate's sentence (about 4,100 prompt tokens) and the score call writes a score per
    # candidate: on the first decisive question they took about 160 of its 400 seconds, and the 1.5B model
    # scored session ids ("D1": 0.0, ...) instead of the candidates, so the union was the pick alone.
    # "embedding": the K2 candidates most similar to the question, no call.
    mra_preselect: Literal["llm_union", "llm_pick", "embedding"] = setting(
        "embedding", "MRAgent: how seed events above K2 are preselected: by similarity to the question, no call "
                     "(embedding), an LLM pick (llm_pick), or the union of an LLM pick and an LLM score "
                     "(llm_union, the spec)", paper="llm_union")
    mra_ingest_window_tokens: int = setting(
        1200, "MRAgent: tokens per ingestion window (cue extraction); set at ingest", ge=1)
    # Issue 34 (the paper calls tools natively: "auto" binds them and reads either form). The navigate prompt states
    # the JSON protocol either way; on the decisive rows the local model answered in JSON text in 74 of 74 navigate
    # replies and never with a native call. "json" binds no tools, so the chat template adds no tool block to the
    # prompt, the reply is held to the protocol's schema, and the final answer call can continue the navigate
    # exchange (mra_answer_continues).
    mra_tool_protocol: ToolProtocol = setting(
        "json", "MRAgent: native tool calls, a JSON protocol, or auto by endpoint (both read)", paper="auto")
    # Improvement (spec: unknown ids are dropped): a cue reply that names a turn ("D1:3") instead of its
    # sentence ids ("D1:3-1") is read as covering that turn's sentences; the verbatim check still applies.
    # On the dev-split cost slice it saved 18 of 18 sentences of one session from the token fallback.
    mra_cues_accept_turn_ids: bool = setting(
        True, "MRAgent: a cue reply naming a turn id covers that turn's sentences", paper=False)
    # --- mra_ingest_format (issue 12: fewer generated tokens at ingestion; formats.py in this folder)
    # "json" is the spec's keyed replies, kept so a benchmark can restore the old path. "compact" asks
    # for positional arrays with local numbers and "" for the session date (same memory, about 40%
    # fewer generated tokens; graphs/mragent/DESIGN.md). "compact_merged" also writes each sentence's cues in
    # the rewrite call: one call per window instead of two. Changing it re-ingests (new cache keys).
    mra_ingest_format: Literal["compact", "compact_merged", "json"] = setting(
        "compact", "MRAgent: ingestion reply format: compact arrays (compact), compact with the cues in the "
                   "rewrite call, one call per window (compact_merged), or the spec's keyed JSON (json); "
                   "set at ingest", paper="json")
    # --- end mra_ingest_format
    # Improvement (spec: call B, an LLM cue extraction per window): "lexical" skips call B and takes each
    # sentence's content words (no stopwords, at least 3 characters, at most 30) as its cues, plus the
    # speaker. The 1.5B model's call B copied nearly every word of each sentence, "the" and "you"
    # included, and was about a third of MRAgent's generated tokens at ingestion; the measured effect is
    # in graphs/mragent/DESIGN.md. "llm" = the spec. Ignored by compact_merged, whose cues come with call A.
    mra_ingest_cues: Literal["lexical", "llm"] = setting(
        "lexical", "MRAgent: cues from each sentence's content words, no call (lexical), or the spec's cue "
                   "extraction call per window (llm); set at ingest", paper="llm")
    # Issue 34 (spec: call A rewrites every turn into sentences, "llm"). On a CPU the builder is decode-bound
    # (about 1200 generated tokens per LoCoMo session at ~16 tokens/s), and the rewritten sentences are most
    # of those tokens. "turn": call A writes per turn only its tag, topics and date (plus the topics and
    # facts), and each turn is one event whose sentence is the turn itself, "<speaker>: <text>" (the name
    # stands for "I"; an image caption as the turn's text has it), embedded and the source of its cues.
    # Applies to the compact format; json (the spec's keys) and compact_merged (cues copied from the written
    # sentences) always have the model write them. Changing it re-ingests (new cache keys and stamps).
    mra_ingest_sentences: Literal["turn", "llm"] = setting(
        "turn", "MRAgent: each event's sentence is its turn as '<speaker>: <text>' and call A writes only tags, "
                "topics, dates and facts (turn), or call A rewrites every turn into sentences (llm, the spec); "
                "compact format only; set at ingest", paper="llm")
    # Issue 34 (with mra_ingest_sentences="turn"; "llm" = a tag per turn written by the model, as the spec's
    # events have). In the decisive build of conv-26 (16 call-A replies, 306 rows, 405 generated tokens a
    # session, 66.6 s) 134 tags only repeated a topic's title and about half named a speaker (made "Other"),
    # and 75 of the 84 `times` rows gave the session date itself: the tag and date columns were most of the
    # decode and carried little. "derived": a row is the turn's topic numbers only; its tag is its first
    # topic's title and its date the day its own text names ("yesterday", "last Saturday", a written date:
    # recollect.spoken_days.spoken_day), else the session date. Changing it re-ingests (new cache keys and stamps).
    mra_turn_labels: Literal["derived", "llm"] = setting(
        "derived", "MRAgent: with turn sentences, a turn's tag is its first topic and its date the day its text "
                   "names (derived), or call A writes a tag per turn and the dates (llm); set at ingest", paper="llm")
    # Improvement (spec: the navigate or forced answer is final): one more call rewrites the answer into a
    # short span with absolute dates, the rewrite MGRetrieval's spec ends with (app/answer_rewrite.py).
    # The 1.5B model answers MRAgent's questions in full sentences ("Caroline went to the group on May 8,
    # 2023."), which LoCoMo-F1 scores near zero; the measured effect is in graphs/mragent/DESIGN.md.
    # Off since mra_final_answer_tokens: the final call answers in rag's short form; the rewrite was measured on
    # the spec's sentence answers.
    mra_answer_rewrite: bool = setting(
        False, "MRAgent: rewrite the answer into a short span with one more call (false = spec)")
    # Issue 35 (spec: the navigate answer or the forced final call is the answer). On the decisive rows MRAgent
    # showed the model as many gold turns as rag (70.9 against 70.2 %) and cited more (36.6 against 34.9 %), yet
    # scored 9.4 points below it (single-hop 18.7 below): its answers are written in the navigate loop, among
    # tool calls, kept-memory lists and instructions, by the 1.5B model. >0: one last call writes the answer as
    # rag does, with the baselines' prompt and turn lines, from the turns the loop showed and its tools returned
    # (the navigate answer's citations first, then the rest ranked for the question) within this many tokens
    # (1280 = rag's five chunks of 256: the same answer-prompt budget); it replaces the forced final call, which
    # runs only when it gives no answer and the loop gave none (recollect.turn_answer). 0 = the spec.
    mra_final_answer_tokens: int = setting(
        1280, "MRAgent: one last call answers as rag does from the turns the loop showed and returned, the navigate "
              "answer's citations first, within this many tokens of turns (0 = the spec's answer)", ge=0, paper=0)
    # Issue 35 (the paper has no final answer call). On the 77 decisive questions with gold turns at 5d56a526 the
    # final call showed 70.8 % of the gold turns (single-hop 76.5 % against rag's 85.3 % on the same questions): a
    # cue path or a ranked turn reaches a turn, not the turn before it that says what it answers, which rag's
    # chunks of neighbouring turns hold. Replaying the call's packing with the rows' turns (no model), adding the
    # turns next to each in its session to the turns it ranks raised that to 76.6 % within the same 1,280 tokens
    # (1 place each side; 2 places: 77.1 %). N > 0: the final answer call also ranks the turns up to N places
    # before and after each turn the loop showed or returned (recollect.turn_answer.with_neighbours). 0 = only
    # those turns.
    mra_final_neighbours: int = setting(
        1, "MRAgent: the final answer call also ranks the turns up to this many places before and after each turn "
           "the loop showed or returned, in its session (0 = only those turns)", ge=0, le=5)
    # Issue 34: the final answer call in rag's own prompt re-sends every turn it reads, and a CPU server computes
    # all of it (about 1,300 prompt tokens a question, a second navigate call's worth), since no earlier prompt of
    # the question begins the same way. True: it continues the last navigate exchange instead (as the forced call
    # does with mra_answer_continues): the navigate prompt and reply unchanged, so the server's cache serves them,
    # then one message with rag's answer rules and only the picked turns the navigate prompt did not hold, in rag's
    # turn lines (final.py). It reads the same turns, plus the navigate prompt's. False = rag's own prompt. JSON
    # protocol only; a continuation that would not fit the runtime's window uses rag's prompt. Off: on the decisive
    # questions both layouts answered (README.md in this folder, "The final answer call") the continuation cost
    # about 650 computed prompt tokens a question less but answered clearly worse: among the navigate loop's
    # instructions and tool calls the 1.5B model loses rag's short answers, as it did before the final call.
    mra_final_answer_continues: bool = setting(
        False, "MRAgent: the final answer call continues the last navigate exchange with one new message holding "
               "the turns it did not show (false = rag's own answer prompt with every turn)")

    # Issue 34 (the paper's prompt is the "false" layout). On a CPU a call costs its prompt's prefill, and
    # llama.cpp reuses the longest common prefix with the slot's previous prompt. True: the navigate prompt
    # puts what stays the same first (instructions, tools, the question, the seed), then the earlier calls
    # oldest first (each round appends to them), then what changes (kept memories, the newest results, the
    # round); the same lines as before (prompting.py in this folder). False = the earlier prompt, byte for byte.
    mra_prefix_layout: bool = setting(
        True, "MRAgent: navigate prompt with its fixed part first and the earlier calls oldest first, so a "
              "server's prompt cache reuses the previous round's prompt (false = the earlier layout)", paper=False)
    # Issue 34: the span rewrite (mra_answer_rewrite) of an answer that is already a short span without a digit
    # ("Biscuit", "Likely yes") can only restate it. Answers of at most this many words skip the call (the
    # answer record says so); dates and numbers are always rewritten. 0 = every answer is rewritten.
    mra_rewrite_skip_words: int = setting(
        3, "MRAgent: skip the answer rewrite for answers of at most this many words with no digit (0 = never "
           "skip)", ge=0, paper=0)
    # Issue 34 (spec: a round whose calls were all made before runs nothing, and the loop goes on). Nothing new
    # reaches the next navigate prompt, so the model writes the same calls again until the round budget ends:
    # the first decisive question's tape has 5 navigate calls in a row with the same prompt and the same reply.
    # True: a round whose calls all repeat earlier ones goes to the final answer (the route record says so).
    mra_stop_on_repeat: bool = setting(
        True, "MRAgent: a round whose tool calls all repeat earlier ones goes to the final answer (false = the "
              "loop goes on to the round budget)", paper=False)
    # Issue 34 (spec: no bounds). The 1.5B model's replies run on: cue alternatives chained until the cap, keep
    # lists of ids until the cap, a final answer as a paragraph. True: the cue and final-answer grammars bound
    # their lengths (schemas.py, Bounded*), and a navigate reply is cut at 320 tokens instead of 500 (its complete
    # calls are kept: protocol.py). False = the spec's unbounded requests.
    # Issue 34 (the paper: the final call has its own prompt). The forced final call re-reads memories the last
    # navigate prompt held (1,045 computed prompt tokens a question on the decisive rows, 19 from the server's
    # cache). True: it resends the last navigate call's prompt and reply unchanged, so a server's prompt cache
    # serves them, and one new message with the final instructions and the memories its own prompt would show that
    # the navigate prompt did not. JSON protocol only (bound tools change the rendered prompt).
    mra_answer_continues: bool = setting(
        True, "MRAgent: the forced final call continues the last navigate exchange with one new message (false = "
              "its own prompt)", paper=False)
    mra_reply_bounds: bool = setting(
        True, "MRAgent: bound the cue and final-answer replies by their grammars and cut a navigate reply at 320 "
              "tokens (false = unbounded, as the spec)", paper=False)
    # Issue 34: a seed cue with more than `mra_tag_max` tags (a speaker's name is a cue of every turn of theirs,
    # so it has dozens) costs a scoring call that writes a score per tag, up to 600 tokens on a CPU that decodes
    # about 10 a second. "embedding": the tags are ranked by their events' similarity to the question, as the
    # tools already rank them and as the seed did when the call failed; no call. "llm" = the paper. On the first
    # decisive question the call wrote 391 tokens (about 33 s).
    mra_tag_score: Literal["llm", "embedding"] = setting(
        "embedding", "MRAgent: rank a seed cue's tags above mra_tag_max by embedding similarity to the question, "
                     "no call (embedding), or by an LLM scoring call (llm, the paper)", paper="llm")
    # Issue 34 (the paper: a cue call per question). The call wrote 110 tokens a question (3.8 s of MRAgent's
    # 20.4 s on the decisive rows, benchmarks/reports/speed/mragent_calls.md), and the memory's cues are the
    # turns' content words (mra_ingest_cues = lexical) that the question's cues must match. "lexical": the
    # question's first six content words, each with the memory's other forms of it as alternatives ("paint" ->
    # "painting"), and the time window of a month or year the question names ("in May 2023"); no call.
    mra_question_cues: Literal["lexical", "llm"] = setting(
        "lexical", "MRAgent: the question's cues are its content words and their forms in the memory, no call "
                   "(lexical), or an LLM cue call (llm, the paper)", paper="llm")
    # Issue 34 (the paper sets no share: the seed is the paths' events). The seed's lines are most of the navigate
    # prompt (about 1,400 of its 1,800 tokens on the decisive rows), and with `mra_final_answer_tokens` the final
    # call picks its turns, ranked for the question, from every turn the seed reached, the lines the navigate
    # prompt could not hold included (they are in `retrieved_turn_ids`). The navigate call then mostly chooses tool
    # calls, so a smaller share costs its prefill less and changes the final call's turns only through the tool
    # results it chooses and the answer it may write (whose citations the final call reads first).
    mra_seed_share: float = setting(
        0.6, "MRAgent: share of the navigate prompt's memory room (llm_max_prompt_tokens less its instructions) "
             "that the seed's lines may fill; the rest is for kept memories and tool results", ge=0.05, le=1)
    # Issue 35 (the paper: the seed is the cue-tag graph's paths only). On the decisive rows MRAgent's largest
    # leak was retrieval: its seed reached 61 % of the gold turns, rag's one similarity search 70 % (single-hop
    # 63 vs 80 %), since a cue path only reaches a turn that shares the question's words. N > 0: the seed also
    # lists the N turns most relevant to the question by cosine and BM25 fused (recollect.memory.turn_ranking,
    # as HyMem's light call ranks them) that the paths did not reach, under the seed's budget, after the
    # paths' events. 0 = the paper's seed.
    mra_seed_ranked_turns: int = setting(
        8, "MRAgent: turns ranked by cosine and BM25 fused added to the seed after the cue paths' events "
           "(0 = the paper's seed)", ge=0, paper=0)


@dataclass(kw_only=True)
class MRAgentContext(MRAgentSettings, Context):
    """The `mragent` graph's runtime settings: the shared ones plus MRAgent's."""
