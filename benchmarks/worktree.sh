#!/usr/bin/env bash
# A git worktree of this checkout, with its own .venv that reuses the checkout's installed packages.
#
#   benchmarks/worktree.sh ../recollect-eval            # a detached worktree at HEAD
#   benchmarks/worktree.sh ../recollect-eval 26343b6    # at a fixed commit
#
# Why: a long eval must run on a fixed commit while work on the checkout goes on. The package is installed
# editable (setup.py maps app/ -> recollect), so the checkout's .venv always imports the checkout's code; the
# worktree's own .venv imports the worktree's code instead. It installs nothing but recollect itself (no
# torch, no dependencies: a .pth file puts the checkout venv's site-packages on its path), so it takes
# seconds. The model and runtime come from the shared cache (~/.cache/recollect), as for the checkout.
set -euo pipefail
MAIN="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
WT="${1:?usage: benchmarks/worktree.sh PATH [COMMIT]}"
REF="${2:-HEAD}"
test -x "$MAIN/.venv/bin/python" || { echo "error: $MAIN/.venv is missing: run 'make venv' in $MAIN first" >&2; exit 2; }
if [ ! -e "$WT/.git" ]; then
  git -C "$MAIN" worktree add --detach "$WT" "$REF"
fi
WT="$(cd "$WT" && pwd)"
if [ ! -x "$WT/.venv/bin/python" ]; then
  python3 -m venv "$WT/.venv"
  # the checkout's setuptools builds recollect (the venv's bundled one predates pyproject's license field)
  "$WT/.venv/bin/python" -m pip uninstall -q -y setuptools
fi
site() { "$1" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }
# A plain path line: the checkout venv's own .pth files (its editable hook for recollect) are not run.
site "$MAIN/.venv/bin/python" > "$(site "$WT/.venv/bin/python")/_recollect_shared_packages.pth"
"$WT/.venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e "$WT" 2>&1 \
  | grep -v -i "outside environment" || true
"$WT/.venv/bin/python" - "$WT" <<'PY'
import sys
from pathlib import Path

import recollect

where = Path(recollect.__file__).resolve()
assert where.is_relative_to(Path(sys.argv[1]).resolve()), f"recollect imports from {where}, not the worktree"
print(f"worktree ready: {sys.argv[1]} (recollect from {where.parent})")
PY
