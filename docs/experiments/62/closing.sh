#!/bin/bash
# closing.sh WORKTREE OUT: issue 11's figures at one commit (section 62): the issue table
# (the shipped scenarios and generated:1..30, seeds 1-3) for grid, queueing, astar and HPA at
# 50/60/70/80 %, then the fresh GPU set (seeds 1-3) for grid, into OUT/ (about 90 minutes on
# two cores).
W=$(cd "$1" && pwd); O=$(mkdir -p "$2" && cd "$2" && pwd); D=$(cd "$(dirname "$0")/.." && pwd)
cd $W; date > $O/start
.venv/bin/python bench/slo.py --scenarios examples/scenarios/*.yaml $(seq -f 'generated:%g' 1 30) \
  --planners grid queueing astar hpa@50 hpa@60 hpa@70 hpa@80 --seeds 1 2 3 --workers 2 --json \
  > $O/table_all.json 2> $O/table_all.err
date > $O/table_done
S=$(for x in $(cat $D/48/fresh.txt); do echo generated:$x; done)
.venv/bin/python bench/slo.py --scenarios $S --planners grid --seeds 1 2 3 --workers 2 --json \
  > $O/fresh_s123.json 2> $O/fresh.err
date > $O/done
