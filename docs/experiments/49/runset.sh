#!/bin/bash
# runset.sh WORKTREE SET OUT: bench/slo.py, grid, seed 1, on one of the sets of section 49
# (SET: table; fresh or g31 of section 48; unseen of this section), run from WORKTREE's code.
D=$(cd "$(dirname "$0")" && pwd)
cd "$1"
if [ "$2" = table ]; then S="examples/scenarios/*.yaml $(seq -f 'generated:%g' 1 30)"
else L=$D/$2.txt; [ -f "$L" ] || L=$D/../48/$2.txt
     S=$(for x in $(cat "$L"); do echo generated:$x; done); fi
.venv/bin/python bench/slo.py --scenarios $S --planners grid --seeds 1 --workers 2 --json > "$3" 2>"$3.err"
