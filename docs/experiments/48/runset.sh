#!/bin/bash
# runset.sh WORKTREE SET OUT
cd $1
if [ "$2" = table ]; then S="examples/scenarios/*.yaml $(seq -f 'generated:%g' 1 30)"; else S=$(for x in $(cat docs/experiments/48/$2.txt); do echo generated:$x; done); fi
.venv/bin/python bench/slo.py --scenarios $S --planners grid --seeds 1 --workers 2 --json > $3 2>$3.err
