"""A model of the planning batches' cost against one-by-one planning (1.0) for patterns of reservations among 1,000
    intents: (cost, plans per intent, most plans of one intent); a joined plan costs 2.0 of 2.3. python docs/experiments/47/batch_policy.py"""
import random
def run(reserves, B=16):
    n = len(reserves); plans = [0]*n; at = 0; hinted = set(); rs = []; cost = 0.0; size = B
    while at < n:
        end = min(at + size, n)
        end = min((i + 1 for i in hinted if at <= i < end), default=end)
        sz = end - at; cost += sz * (2.3 - 0.3 * (1 - 1 / sz))
        for i in range(at, end): plans[i] += 1
        kept = 0
        for i in range(at, end):
            kept += 1
            if reserves[i]: rs.append(i); break
        hinted.difference_update(range(at, at + kept))
        for i in range(at + kept, end): (hinted.add if reserves[i] else hinted.discard)(i)
        at += kept
        if len(rs) >= 2:
            expect = rs[-1] + (rs[-1] - rs[0]) / (len(rs) - 1)
            size = min(B, max(1, round(expect - at + 1)))
    return round(cost / (2.3 * n), 3), round(sum(plans) / n, 3), max(plans)
rng = random.Random(1)
pats = {"32nd": lambda i: i % 32 == 0, "7th": lambda i: i % 7 == 0, "3rd": lambda i: i % 3 == 0,
        "all": lambda i: True, "p.1": lambda i: rng.random() < 0.1, "p.01": lambda i: rng.random() < 0.01, "p.3": lambda i: rng.random() < 0.3, "first only": lambda i: i == 0, "none": lambda i: False}
for k, f in pats.items():
    r = [f(i) for i in range(1000)]
    print(f"{k:10}", run(r))
