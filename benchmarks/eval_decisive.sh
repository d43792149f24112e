#!/usr/bin/env bash
# The decisive evaluation: enough questions to tell the methods apart, with intervals.
#
#   benchmarks/eval_decisive.sh [/path/to/locomo_dev.json]     # resumable: re-run it after any interruption
#   METHODS=rag,hymem benchmarks/eval_decisive.sh              # some graphs first; the same run folder resumes
#
# Questions: both dev conversations whole (conv-26, conv-30; namespaces locomo-<id>), categories 1-4, a
# stratified sample of 120 by category with seed 0 (59 single-hop, 32 temporal, 22 multi-hop, 7
# open-domain). No LLM judge (`--judge none`: the 1.5B model marks nearly every answer CORRECT); LoCoMo-F1
# with a 95 % bootstrap interval per method, each method's paired difference from rag, the evidence funnel.
# Every row names the commit and settings it came from, so a run resumed across commits says so.
# Memory construction of the two whole conversations (every builder) comes first and is reused by later
# runs on the same DATA_DIR. On 2 CPU cores the whole run takes about ten hours of model time: run it in
# the background on a fixed commit (a git worktree), and nothing else that needs the model beside it.
#
# The LoCoMo file (CC BY-NC 4.0) is read at run time and never copied. The run folder holds per-question
# rows with dataset text and stays uncommitted; only summary.md/json, the plots and a README naming the
# command and the graphs covered are copied to benchmarks/reports/eval_decisive/ (or $REPORT).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-/work/shared/data/locomo/locomo_dev.json}"
OUT="${OUT:-runs/eval_decisive}"
DATA_DIR="${DATA_DIR:-runs/eval_decisive_data}"
REPORT="${REPORT:-benchmarks/reports/eval_decisive}"
# cheapest first, so a partial run already compares several graphs with rag
METHODS="${METHODS:-rag,full_context,hymem,mgretrieval,memr3,mragent}"
SET_ARGS=()
for kv in ${SETTINGS:-}; do SET_ARGS+=(--set "$kv"); done

.venv/bin/python -m recollect.cli --data-dir "$DATA_DIR" eval --data "$DATA" \
  --methods "$METHODS" --conversations conv-26 conv-30 --categories 1,2,3,4 --sample 120 --seed 0 \
  --judge none --out "$OUT" "${SET_ARGS[@]}"

mkdir -p "$REPORT"
for f in summary.md summary.json accuracy_vs_tokens.png accuracy_vs_seconds.png per_category.png evidence_funnel.png; do
  [ -f "$OUT/$f" ] && cp "$OUT/$f" "$REPORT/"
done
{
  echo "# Decisive eval report"
  echo
  echo "Made by \`METHODS=$METHODS SETTINGS=\"${SETTINGS:-}\" DATA_DIR=$DATA_DIR benchmarks/eval_decisive.sh\`,"
  echo "last resumed $(date -u +%Y-%m-%d) on $(nproc) CPU cores; backbone, settings and the commit of every row"
  echo "in summary.json (\`provenance\`). Graphs covered: $METHODS."
} > "$REPORT/README.md"
echo "copied the report to $REPORT/"
