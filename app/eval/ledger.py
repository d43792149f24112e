"""Eval rows that can be committed: identifiers and numbers only, one JSON object per line per graph.

A LoCoMo row (`recollect.eval.rows`) holds the question, the gold answer and the prediction, which are
dataset text (CC BY-NC) and never enter the repository. Its ledger row keeps everything the summary,
the intervals and the funnel need, under the same field names, and replaces text by digests:

- `question_digest`: sha256 of the question as asked, so a changed dataset is noticed;
- `answer_digest` (and `draft_digest`): sha256 of the prediction, so a carried-over row proves its
  replay gave the same answer;
- `error`: the exception's class only (a message may quote the dialogue).

Every ledger row also names its graph's `fingerprint` (`recollect.eval.fingerprint`), the llama.cpp build
and CPU kernels its replies came from (`provenance`), and each carry-over that kept it current
(`carried_over`). Files: `<rows dir>/<graph>.jsonl`; a later line for the same (graph, question,
fingerprint) replaces an earlier one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

# The fields a ledger row copies from a LoCoMo row as they are: ids, categories, scores, turn ids, costs.
COPIED = (
    "method", "backbone_model", "judge_model", "sample_id", "question_id", "category", "category_name",
    "is_duplicate_of", "locomo_f1", "locomo_f1_r3", "mem0_f1", "bleu1", "judge_label", "judge_score",
    "evidence_ids", "retrieved_turn_ids", "evidence_recall", "session_recall", "supports", "support_recall",
    "evidence_in_memory", "evidence_retrieved", "evidence_shown", "evidence_cited", "evidence_stages",
    "n_llm_calls", "n_llm_calls_aux", "prompt_tokens", "completion_tokens", "cached_tokens", "token_source",
    "mg_tokens", "mg_tokens_main", "mg_tokens_aux", "wall_time_s",
    "prefill_s", "decode_s", "timed_calls", "llm_s", "retrieval_s",
    "mg_rounds", "mg_speaker_only_rounds", "mg_cap_truncated_rounds", "mg_filled_turns",
    "mg_ungrounded_sufficient_rounds", "draft_locomo_f1", "code_commit", "settings_id",
)
LEDGER_FIELDS = (
    *COPIED, "question_digest", "answer_digest", "draft_digest", "prompt_tokens_computed", "judge_error",
    "error", "fingerprint", "provenance", "carried_over",
)
BUILDS_NAME = "builds.jsonl"  # beside the rows: each memory build's seconds (recollect.eval.estimate)
# A build entry's fields (recollect.eval.ledger_run's for graphs, benchmarks/peers_table.py's for peers).
BUILD_FIELDS = (
    "builder", "date", "fingerprint", "provenance", "recorded_requests", "replayed_requests", "sample_id",
    "seconds", "sessions", "session", "llm_calls", "stored_after",
)
# A turn id (D3:5, or any id shape a dialogue file gives: short, no spaces), a digest, a label.
_ID = re.compile(r"[^\s]{1,80}")


def digest(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _error_class(error: str | None) -> str | None:
    """`ValueError: <message>` -> `ValueError`: the class says what failed, the message may quote text."""
    if not error:
        return None
    head = error.split(":", 1)[0].strip()
    return head if re.fullmatch(r"[A-Za-z_][\w.]{0,100}", head) else "Error"


def ledger_row(row: dict[str, Any], question: str, fingerprint: str, provenance: dict[str, Any],
               carried_over: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The committed form of one LoCoMo row (`recollect.eval.rows.evaluate_pair`'s)."""
    out = {k: row.get(k) for k in COPIED}
    out.update({
        "question_digest": digest(question),
        "answer_digest": digest(row.get("prediction") or ""),
        "draft_digest": digest(row.get("draft_answer")),
        "prompt_tokens_computed": max(int(row.get("prompt_tokens") or 0) - int(row.get("cached_tokens") or 0), 0),
        "judge_error": _error_class(row.get("judge_error")),
        "error": _error_class(row.get("error")),
        "fingerprint": fingerprint,
        "provenance": provenance,
        "carried_over": list(carried_over),
    })
    return {k: out[k] for k in LEDGER_FIELDS}


def one_per_question(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The latest row of each (graph, question): a question may hold rows under both digests a graph accepts
    (a row and its copy under the code digest), which must count once."""
    latest = {(r["method"], r["question_id"]): r for r in rows}
    return list(latest.values())


def carried(old: dict[str, Any], fingerprint: str, evidence: dict[str, Any]) -> dict[str, Any]:
    """`old` kept current under `fingerprint`: its numbers stand (they were measured), the carry-over and
    its evidence are appended."""
    return {**old, "fingerprint": fingerprint,
            "carried_over": [*old.get("carried_over", []), {"from": old["fingerprint"], **evidence}]}


def check_text_free(row: dict[str, Any], fields: Sequence[str] = LEDGER_FIELDS) -> None:
    """Raise ValueError when a ledger row (or, with `fields=BUILD_FIELDS`, a build entry) holds anything but
    ids, labels, digests and numbers."""
    unknown = set(row) - set(fields)
    if unknown:
        raise ValueError(f"ledger row has fields that are not ledger fields: {sorted(unknown)}")

    def walk(value: Any, where: str) -> None:
        if isinstance(value, str):
            if not _ID.fullmatch(value):
                raise ValueError(f"ledger row field {where} holds free text ({len(value)} characters)")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(str(k), f"{where} key")
                walk(v, f"{where}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")

    for k, v in row.items():
        if k == "provenance":  # machine facts (runtime, kernels), written by this module, never dataset text
            continue
        walk(v, k)


# --------------------------------------------------------------------------------------------- files


def ledger_path(rows_dir: Path, method: str) -> Path:
    return Path(rows_dir) / f"{method}.jsonl"


def read_ledger(rows_dir: Path | None, methods: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Every ledger row in the folder (of the given graphs), last write winning per (graph, question,
    fingerprint). A truncated last line (an interrupted write) is skipped."""
    if rows_dir is None or not Path(rows_dir).is_dir():
        return []
    wanted = set(methods) if methods is not None else None
    latest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for path in sorted(Path(rows_dir).glob("*.jsonl")):
        if path.name == BUILDS_NAME or (wanted is not None and path.stem not in wanted):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines) - 1:
                    continue
                raise ValueError(f"{path}: line {i + 1} is not valid JSON; fix or delete the line") from None
            latest[(row["method"], row["question_id"], row["fingerprint"])] = row
    return list(latest.values())


def append_ledger(rows_dir: Path, row: dict[str, Any]) -> None:
    """Append one row to its graph's file, flushed and synced: the resume point of a time-boxed run."""
    check_text_free(row)
    path = ledger_path(rows_dir, row["method"])
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(row, ensure_ascii=True, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


# --------------------------------------------------------------------------------------------- provenance


@cache
def runtime_provenance() -> dict[str, Any]:
    """The llama.cpp build answering (runtime, version, the wheel it came from) and its CPU kernels."""
    from recollect.settings import get_settings

    s = get_settings()
    if s.llm_base_url:
        return {"runtime": "endpoint"}
    from recollect.llm.native_build import installed_from, installed_version

    if s.local_runtime != "xllamacpp":
        from recollect.llm.local_runtime import LLAMA_VERSION, _built_with

        return {"runtime": f"llama-cpp-python {LLAMA_VERSION}", "build": _built_with(), "kernels": None}
    wheel = installed_from()
    info = _system_info()
    kernels = sorted(k for k, v in re.findall(r"([A-Z0-9_]+) = (\d)", info) if v == "1") if info else None
    return {"runtime": f"xllamacpp {installed_version('xllamacpp')}",
            "build": wheel.parent.name if wheel is not None else "pypi", "kernels": ",".join(kernels or []) or None}


def _system_info() -> str | None:
    try:
        proc = subprocess.run([sys.executable, "-c", "import xllamacpp; print(xllamacpp.get_system_info())"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def provenance_label(p: dict[str, Any] | None) -> str:
    if not p:
        return "unknown"
    return " ".join(str(p[k]) for k in ("runtime", "build", "kernels") if p.get(k))


def ledger_markdown(meta: dict[str, Any]) -> list[str]:
    """The summary's account of its rows: one fingerprint per graph, where each row came from."""
    lines = ["## Rows", "",
             f"Committed rows in `{meta['rows_dir']}`; every figure below uses only rows of the graph's current "
             "fingerprint." + (" **Partial**: some rows are still missing; run the same command to continue."
                               if meta["partial"] else ""), "",
             "| graph | fingerprint | rows | reused | carried over now | computed now | missing | carried (all) "
             "| runtime builds |", "|---|---|---|---|---|---|---|---|---|"]
    for method, g in meta["graphs"].items():
        builds = "; ".join(f"{label}: {n}" for label, n in sorted(g["provenance"].items()))
        lines.append(f"| {method} | `{g['fingerprint'][:16]}` | {g['rows']} | {g['reused']} | {g['carried_over_now']} "
                     f"| {g['computed_now']} | {g['missing']} | {g['carried_rows']} | {builds or '–'} |")
    return [*lines, ""]
