#!/usr/bin/env bash
# Example LoCoMo evaluation report: every registered method and both baselines on a tiny dev-split slice.
#
#   benchmarks/eval_example.sh [/path/to/locomo_dev.json]
#
# The model is the embedded default (started and stopped by the eval), or whatever RECOLLECT_LLM_* names.
# Slice: conv-30, its first 2 sessions only (namespace locomo-conv-30-s2), categories 1, 2 and 4, the first
# 3 questions whose gold evidence lies in those sessions. Backbone and judge are the same local model, so
# J is NOT comparable to the papers (they judge with gpt-4o-mini / gpt-4.1); the report says so.
#
# The LoCoMo file (CC BY-NC 4.0) is read at run time and never copied. The full run folder
# (runs/eval_example, resumable: re-run this script after an interruption) holds per-question rows with
# dataset text and stays uncommitted; only summary.md, summary.json and the plots are copied to
# benchmarks/reports/eval_example/.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-/work/shared/data/locomo/locomo_dev.json}"
METHODS="$(.venv/bin/python -c 'from recollect import available_methods; print(",".join(available_methods()))')"

.venv/bin/python -m recollect.cli --data-dir runs/eval_example/data eval --data "$DATA" \
  --methods "$METHODS" --conversations conv-30 --max-sessions 2 --categories 1,2,4 --limit 3 \
  --judge local --out runs/eval_example

mkdir -p benchmarks/reports/eval_example
cp runs/eval_example/summary.md runs/eval_example/summary.json \
   runs/eval_example/accuracy_vs_tokens.png runs/eval_example/per_category.png benchmarks/reports/eval_example/
echo "copied the report to benchmarks/reports/eval_example/"
