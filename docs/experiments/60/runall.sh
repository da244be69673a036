#!/bin/bash
# runall.sh WORKTREE OUT: grid from WORKTREE's code over the fresh set (seeds 1-3, the GPU
# bar's), then the unseen and the 31 sets (seed 1), then the issue's table (seeds 1-3), into
# OUT/ (about 50 minutes on two cores; section 60).
W=$(cd "$1" && pwd); O=$(mkdir -p "$2" && cd "$2" && pwd); D=$(cd "$(dirname "$0")/.." && pwd)
cd $W
date > $O/start
$D/49/runset.sh $W fresh $O/fresh_s1.json; date > $O/fresh_s1_done
$D/50/runseeds.sh $W fresh $O/fresh_s23.json; date > $O/fresh_s23_done
$D/49/runset.sh $W unseen $O/unseen_s1.json; date > $O/unseen_done
$D/49/runset.sh $W g31 $O/g31_s1.json; date > $O/g31_done
.venv/bin/python bench/slo.py --scenarios examples/scenarios/*.yaml $(seq -f 'generated:%g' 1 30) --planners grid --seeds 1 2 3 --workers 2 --json > $O/table_s123.json 2> $O/table.err
date > $O/done
