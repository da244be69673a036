"""Count shape changes (CPU size, device, pool of the configuration column) in bench/trace.py text outputs (section 46).
    python docs/experiments/46/shape_changes.py TRACE.txt..."""
import re, sys
for f in sys.argv[1:]:
    prev = None; changes = []
    for line in open(f):
        parts = line.split()
        if len(parts) < 3 or not re.match(r'^\d', parts[0]): continue
        m = re.match(r'(\d+)x(.*)', parts[2])
        if not m: continue
        shape = m.group(2) + (' ' + parts[3] if parts[3] == 'gpu' or parts[3].startswith('gpu@') else '')
        if prev is not None and shape != prev: changes.append((parts[0], prev, shape))
        prev = shape
    print(f, len(changes), ' '.join(f"{t}:{a}->{b}" for t, a, b in changes[:40]))
