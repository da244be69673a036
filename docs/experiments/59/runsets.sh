#!/bin/bash
# runsets.sh WORKTREE OUT: grid over the issue table (seeds 1-3), then the fresh, unseen and 31 sets (seed 1),
# from WORKTREE's code, into OUT/ (about 55 minutes on two cores).
W=$(cd "$1" && pwd); O=$(mkdir -p "$2" && cd "$2" && pwd); D=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p $O; cd $W
date > $O/start
.venv/bin/python bench/slo.py --scenarios examples/scenarios/*.yaml $(seq -f 'generated:%g' 1 30) --planners grid --seeds 1 2 3 --workers 2 --json > $O/table_s123.json 2> $O/table.err
date > $O/table_done
$D/49/runset.sh $W fresh $O/fresh_s1.json
date > $O/fresh_done
$D/49/runset.sh $W unseen $O/unseen_s1.json
date > $O/unseen_done
$D/49/runset.sh $W g31 $O/g31_s1.json
date > $O/done
