#!/usr/bin/env bash
# The decisive evaluation: enough questions to tell the methods apart, with intervals, resumable across
# sessions and machines through committed text-free rows.
#
#   benchmarks/eval_decisive.sh                          # continue: reuse current rows, compute the rest
#   PLAN=1 benchmarks/eval_decisive.sh                   # per graph: rows current / to carry over / to compute, time
#   METHODS=rag,hymem TIME_BUDGET=140m benchmarks/eval_decisive.sh   # some graphs, stop in time
#   REUSE=0 benchmarks/eval_decisive.sh                  # every request of a computed question to the model
#
# Questions: both dev conversations whole (conv-26, conv-30; namespaces locomo-<id>), categories 1-4, a
# stratified sample of 120 by category with seed 0 (59 single-hop, 32 temporal, 22 multi-hop, 7
# open-domain). No LLM judge (`--judge none`: the 1.5B model marks nearly every answer CORRECT); LoCoMo-F1
# with a 95 % bootstrap interval per method, each method's paired difference from rag, the evidence funnel.
#
# Rows: benchmarks/reports/eval_decisive/rows/<graph>.jsonl hold ids and numbers only (recollect.eval.ledger)
# and are committed. A row is current while its graph's fingerprint is (recollect.eval.fingerprint); a stale
# row is carried over when replaying the model requests recorded for it (the tapes, in ~/.cache/recollect/tapes,
# never committed: they hold dataset text) gives the same answer; the rest is computed. Memory is built into
# ~/.cache/recollect/eval_memory/<builder>-<fingerprint>, so a kept machine skips the build.
# Run it in the background on a fixed commit (benchmarks/worktree.sh) with ROWS pointing at the checkout's
# rows folder, and nothing else that needs the model beside it; commit the rows when it stops.
#
# The LoCoMo file (CC BY-NC 4.0) is read at run time and never copied; the run folder ($OUT) holds rows with
# dataset text and stays uncommitted; summary.md/json and the plots are copied to $REPORT.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-/work/shared/data/locomo/locomo_dev.json}"
OUT="${OUT:-runs/eval_decisive}"
ROWS="${ROWS:-benchmarks/reports/eval_decisive/rows}"
REPORT="${REPORT:-benchmarks/reports/eval_decisive}"
# cheapest first, so a partial run already compares several graphs with rag
METHODS="${METHODS:-rag,full_context,hymem,mgretrieval,memr3,mragent}"
EXTRA=()
for kv in ${SETTINGS:-}; do EXTRA+=(--set "$kv"); done
[ -n "${PLAN:-}" ] && EXTRA+=(--plan)
[ -n "${TIME_BUDGET:-}" ] && EXTRA+=(--time-budget "$TIME_BUDGET")
# A computed question takes the taped reply of every request it repeats (only its new requests reach the
# model): a change to a graph's later calls costs only those. REUSE=0 computes every request.
[ "${REUSE:-1}" != 0 ] && [ -z "${PLAN:-}" ] && EXTRA+=(--reuse-replies)

.venv/bin/python -m recollect.cli eval --data "$DATA" \
  --methods "$METHODS" --conversations conv-26 conv-30 --categories 1,2,3,4 --sample 120 --seed 0 \
  --judge none --out "$OUT" --rows "$ROWS" "${EXTRA[@]}"
[ -n "${PLAN:-}" ] && exit 0

mkdir -p "$REPORT"
for f in summary.md summary.json accuracy_vs_tokens.png accuracy_vs_seconds.png per_category.png evidence_funnel.png; do
  [ -f "$OUT/$f" ] && cp "$OUT/$f" "$REPORT/"
done
{
  echo "# Decisive eval report"
  echo
  echo "Made by \`METHODS=$METHODS SETTINGS=\"${SETTINGS:-}\" benchmarks/eval_decisive.sh\` from the rows in"
  echo "\`$ROWS\`, last continued $(date -u +%Y-%m-%d) on $(nproc) CPU cores. Each graph's figures use only rows"
  echo "of its current fingerprint; summary.md's \"Rows\" table says how many were reused, carried over and"
  echo "computed, and which llama.cpp builds made them."
} > "$REPORT/README.md"
echo "copied the report to $REPORT/"
