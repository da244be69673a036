"""weights_sets.py OUTDIR: per set (fresh, g31, unseen, table), the scenarios whose admin enables
the `weights` actuator, written to OUTDIR/w_SET.txt (one line, for bench/slo.py --scenarios) and
counted on stdout (section 56: the only scenarios a canary's dispatch weight can change)."""
import glob
import sys

sys.path.insert(0, ".")
from bench import slo  # noqa: E402

E = "docs/experiments"
out = sys.argv[1]
sets = {name: [f"generated:{x}" for x in open(f"{E}/{d}/{name}.txt").read().split()]
        for name, d in (("fresh", "48"), ("g31", "48"), ("unseen", "49"))}
sets["table"] = sorted(glob.glob("examples/scenarios/*.yaml")) + [
    f"generated:{i}" for i in range(1, 31)]
for name, scenarios in sets.items():
    keep = [s for s in scenarios if "weights" in slo.load(s).spec.admin.actuators]
    with open(f"{out}/w_{name}.txt", "w") as f:
        f.write(" ".join(keep))
    print(name, len(keep), "of", len(scenarios))
