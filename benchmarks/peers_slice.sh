#!/usr/bin/env bash
# recollect's six graphs, mem0 and LangMem on one slice that fits in about an hour of model time:
# the first five sessions of conv-30, a stratified sample of 12 questions of categories 1-4 (seed 0).
#
#   PEERS_PYTHON=/work/peers-venv/bin/python TIME_BUDGET=45m benchmarks/peers_slice.sh
#
# The graphs' rows go to benchmarks/reports/peers_slice/rows (text-free, committed; `recollect eval --rows`),
# the peers' rows are added there by benchmarks/peers_table.py, which also writes the table
# (benchmarks/reports/peers_slice/table.md). PEERS_PYTHON is a Python with the [peers] extra
# (benchmarks/peers/README.md: a side venv keeps mem0 and LangMem out of the project's).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-/work/shared/data/locomo/locomo_dev.json}"
OUT="${OUT:-runs/peers_slice}"
ROWS="${ROWS:-benchmarks/reports/peers_slice/rows}"
REPORT="${REPORT:-benchmarks/reports/peers_slice}"
PEERS_PYTHON="${PEERS_PYTHON:-.venv/bin/python}"
SEL=(--data "$DATA" --conversations conv-30 --max-sessions 5 --categories 1,2,3,4 --sample 12 --seed 0)
EXTRA=()
[ -n "${TIME_BUDGET:-}" ] && EXTRA+=(--time-budget "$TIME_BUDGET")

.venv/bin/python -m recollect.cli eval "${SEL[@]}" --methods "${METHODS:-rag,full_context,hymem,mgretrieval,memr3,mragent}" \
  --judge none --rows "$ROWS" --out "$OUT" "${EXTRA[@]}"
[ -n "${SKIP_PEERS:-}" ] || "$PEERS_PYTHON" -m benchmarks.peers "${SEL[@]}" --judge none --out "$OUT" --no-plots
.venv/bin/python benchmarks/peers_table.py --run "$OUT" --rows "$ROWS" --report "$REPORT"
