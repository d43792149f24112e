#!/usr/bin/env bash
# The dev-slice evaluation report: every registered graph on both dev conversations, same embedded model.
#
#   benchmarks/eval_dev.sh [/path/to/locomo_dev.json]            # all six graphs, then copy the report
#   METHODS=rag,full_context benchmarks/eval_dev.sh              # a subset first (the same run folder resumes)
#   SETTINGS="memr3_answer_snippets=never" OUT=runs/eval_dev_alt REPORT=benchmarks/reports/eval_dev_alt \
#     benchmarks/eval_dev.sh                                     # an ablation: its own run and report folders
#   SETTINGS="hymem_max_turns_per_item=0" DATA_DIR=runs/eval_dev_data_alt OUT=... REPORT=... benchmarks/eval_dev.sh
#                                                                # an ingestion setting needs its own DATA_DIR too:
#                                                                # the eval reuses a namespace its builder has built
#
# Slice: conv-26 and conv-30, their first 3 sessions (namespaces locomo-<id>-s3), categories 1, 2 and 4, the first
# 8 questions per conversation whose gold evidence lies in those sessions (16 per method). No LLM judge
# (`--judge none`): the 1.5B model marks nearly every answer CORRECT, so LoCoMo-F1 and evidence recall decide.
# The model is the embedded default (started and stopped by the eval), or whatever RECOLLECT_LLM_* names.
# The whole run takes about two and a half hours on 2 CPU cores: run nothing else that needs the model beside
# it (a second llama.cpp server on the same cores slows both by an order of magnitude).
#
# The LoCoMo file (CC BY-NC 4.0) is read at run time and never copied. The run folder (resumable: re-run this
# script after an interruption) holds per-question rows with dataset text and stays uncommitted; only
# summary.md, summary.json, the plots and a README naming the command and the methods covered are copied to
# benchmarks/reports/eval_dev/ (or $REPORT). A report over a subset says which graphs it lacks.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-/work/shared/data/locomo/locomo_dev.json}"
OUT="${OUT:-runs/eval_dev}"
DATA_DIR="${DATA_DIR:-runs/eval_dev_data}"
REPORT="${REPORT:-benchmarks/reports/eval_dev}"
ALL="$(.venv/bin/python -c 'from recollect import available_methods; print(",".join(available_methods()))')"
METHODS="${METHODS:-$ALL}"
SET_ARGS=()
for kv in ${SETTINGS:-}; do SET_ARGS+=(--set "$kv"); done

# One data dir for every run of the slice (unless DATA_DIR names another), so memories are built once and shared
# by ablations of graph settings; the eval does not rebuild a namespace when only an ingestion setting changed.
.venv/bin/python -m recollect.cli --data-dir "$DATA_DIR" eval --data "$DATA" \
  --methods "$METHODS" --conversations conv-26 conv-30 --max-sessions 3 --categories 1,2,4 --limit 8 \
  --judge none --out "$OUT" "${SET_ARGS[@]}"

mkdir -p "$REPORT"
cp "$OUT/summary.md" "$OUT/summary.json" "$OUT/accuracy_vs_tokens.png" "$OUT/per_category.png" "$REPORT/"
MISSING="$(.venv/bin/python -c 'import sys; a, m = sys.argv[1].split(","), sys.argv[2].split(","); print(", ".join(x for x in a if x not in m))' "$ALL" "$METHODS")"
{
  echo "# Dev-slice eval report"
  echo
  echo "Made by \`METHODS=$METHODS SETTINGS=\"${SETTINGS:-}\" DATA_DIR=$DATA_DIR benchmarks/eval_dev.sh\` on $(date -u +%Y-%m-%d),"
  echo "$(nproc) CPU cores, backbone and settings in summary.json. Graphs covered: $METHODS."
  if [ -n "$MISSING" ]; then
    echo
    echo "**Partial report**: no rows for $MISSING (run \`benchmarks/eval_dev.sh\` to complete it; it resumes)."
  fi
} > "$REPORT/README.md"
echo "copied the report to $REPORT/"
