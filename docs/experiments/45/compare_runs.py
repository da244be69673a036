"""Per-scenario grid cost and violation-minutes of two bench/slo.py --json outputs, where they differ
(section 45): python docs/experiments/45/compare_runs.py BEFORE.json AFTER.json"""
import json, sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
for d,n in ((a,'A'),(b,'B')):
    g=d['gpu']['grid']; print(n, {k:g[k] for k in ('cost','oracle_cost','runs_with_gpu','gpu_hours')}, 'viol', sum(v['grid']['violation_minutes'] for v in d['per_scenario'].values()))
a=a['per_scenario']; b=b['per_scenario']
for k in sorted(a, key=lambda k: b[k]['grid']['cost']-a[k]['grid']['cost']):
    x,y=a[k]['grid'],b[k]['grid']
    if abs(x['cost']-y['cost'])>1e-9 or x['violation_minutes']!=y['violation_minutes']:
        print(f"{k:10} {x['cost']:7.3f} -> {y['cost']:7.3f}  viol {x['violation_minutes']:4} -> {y['violation_minutes']:4}")
