#!/bin/bash
# runsets.sh WORKTREE OUT: grid from WORKTREE over the fresh set (seeds 1-3), the unseen set
# (seed 1) and the issue table (seeds 1-3), into OUT/ (about 45 minutes on two cores; section 61).
W=$(cd "$1" && pwd); O=$(mkdir -p "$2" && cd "$2" && pwd); D=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p $O; cd $W; date > $O/start
$D/49/runset.sh $W fresh $O/fresh_s1.json; date > $O/fresh_s1_done
$D/50/runseeds.sh $W fresh $O/fresh_s23.json; date > $O/fresh_s23_done
$D/49/runset.sh $W unseen $O/unseen_s1.json; date > $O/unseen_done
.venv/bin/python bench/slo.py --scenarios examples/scenarios/*.yaml $(seq -f 'generated:%g' 1 30) --planners grid --seeds 1 2 3 --workers 2 --json > $O/table_s123.json 2> $O/table.err
date > $O/done
