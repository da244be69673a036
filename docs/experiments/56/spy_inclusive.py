"""spy_inclusive.py RAW [ROOT [N]]: a py-spy raw (collapsed) profile summed per frame, inclusive,
over the samples under the frame ROOT (default _plan_in_order); the N largest (default 70)."""
import sys, collections, re
inc = collections.Counter(); self_ = collections.Counter(); total = 0; under = 0
root = sys.argv[2] if len(sys.argv) > 2 else "_plan_in_order"
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n); frames = stack.split(";")
    total += n
    names = [re.sub(r" \(/work/main/|\(/work/main/", " (", f) for f in frames]
    if not any(root in f for f in names): continue
    under += n
    seen = set()
    for f in names:
        if f not in seen: inc[f] += n; seen.add(f)
    self_[names[-1]] += n
print("total", total, "under", root, under)
for f, c in inc.most_common(int(sys.argv[3]) if len(sys.argv) > 3 else 70):
    print(f"{c/under*100:6.1f}% {f[:150]}")
print("self time per function (all its lines), the largest:")
by_function = collections.Counter()
for f, c in self_.items():
    by_function[re.sub(r":\d+\)$", ")", f)] += c
for f, c in by_function.most_common(10):
    print(f"{c/under*100:6.1f}% {f[:150]}")
