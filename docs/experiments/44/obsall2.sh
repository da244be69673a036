#!/bin/sh
# usage: obsall2.sh <checkout of the commit to hash> <output file>
# Hashes every observe() snapshot and every plan of seven whole runs (obsdump2.py).
S="$(cd "$(dirname "$0")" && pwd)/obsdump2.py"
cd "$1" || exit 1
for s in examples/scenarios/flash-sale.yaml examples/scenarios/multi-tenant.yaml \
         examples/scenarios/diurnal-shop.yaml generated:23 generated:2183 generated:26 \
         generated:2515; do
  timeout 1200 .venv/bin/python "$S" "$s" 1
done > "$2" 2>&1
