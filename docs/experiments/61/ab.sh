#!/bin/bash
# ab.sh SCENARIO SEED TREE...: slowplans.py's totals and plan time for each worktree in turn,
# twice, alternating (timing on this machine drifts by 10-15 % between runs; section 61).
S=$1; SEED=$2; shift 2; D=$(cd "$(dirname "$0")" && pwd)
for rep in 1 2; do for t in "$@"; do
  echo "== $t rep $rep"; (cd "$t" && .venv/bin/python "$D/slowplans.py" "$S" "$SEED" 0)
done; done
