#!/bin/bash
# runall.sh WORKTREE OUT: section 58's set runs of grid from WORKTREE's code, into OUT/:
# the fresh set and the issue table over seeds 1-3 first (the two cost bars), then the
# unseen set over seeds 1-3 and the 31 at seed 1 (sections 48-50's sets). About 60 minutes
# on two cores.
D=$(cd "$(dirname "$0")/.." && pwd)
W=$(cd "$1" && pwd); O=$(mkdir -p "$2" && cd "$2" && pwd)
"$D/50/runseeds.sh" "$W" fresh "$O/fresh_s23.json"
"$D/49/runset.sh" "$W" fresh "$O/fresh_s1.json"
(cd "$W" && .venv/bin/python bench/slo.py --scenarios examples/scenarios/*.yaml \
    $(seq -f 'generated:%g' 1 30) --planners grid --seeds 2 3 --workers 2 --json \
    > "$O/table_s23.json" 2> "$O/table_s23.json.err")
"$D/49/runset.sh" "$W" table "$O/table_s1.json"
"$D/50/runseeds.sh" "$W" unseen "$O/unseen_s23.json"
"$D/49/runset.sh" "$W" unseen "$O/unseen_s1.json"
"$D/49/runset.sh" "$W" g31 "$O/g31_s1.json"
