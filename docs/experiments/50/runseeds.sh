#!/bin/bash
# runseeds.sh WORKTREE SET OUT: bench/slo.py --json of grid, seeds 2 and 3, on section 49's
# `unseen` set or section 48's `fresh` or `g31`, run from WORKTREE's code (section 50).
D=$(cd "$(dirname "$0")/.." && pwd)
L=$D/49/$2.txt; [ -f "$L" ] || L=$D/48/$2.txt
cd "$1"
S=$(for x in $(cat "$L"); do echo generated:$x; done)
.venv/bin/python bench/slo.py --scenarios $S --planners grid --seeds 2 3 --workers 2 --json > "$3" 2>"$3.err"
