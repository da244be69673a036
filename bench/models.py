"""Model quality: error (MAPE) of the predicted latency percentile on held-out configurations,
against the number of observations the model was trained on.

For each shipped scenario and each workload with an active latency objective, a
characterisation study (optuna, Sobol) records observations at random configurations and
loads; a second study with another seed gives the held-out configurations. The learned model
is trained on the first k observations and scored on the held-out set (configurations whose
true latency is a timeout are excluded: there is no percentile to predict).

    python bench/models.py [--ks 10 20 30 50 100] [--holdout 40] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from knowledge.connect import open_knowledge_base  # noqa: E402
from planner.domain.intents import KPIType  # noqa: E402
from planner.models.latency import QueueingLatencyRegressor  # noqa: E402
from planner.models.observations import dataset  # noqa: E402
from simulator.characterize import characterize  # noqa: E402
from simulator.scenario import load_scenario  # noqa: E402

SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))


def observations(path: Path, workload: str, trials: int, seed: int, objective: str,
                 intent: str) -> Any:
    kb = open_knowledge_base(None)
    characterize(load_scenario(path), workload, trials, kb, seed=seed, train=False)
    return dataset(kb.events(intent), objective)


def evaluate(path: Path, ks: list[int], holdout: int, seed: int) -> list[dict[str, Any]]:
    sc = load_scenario(path)
    rows = []
    profiles = {p.key: p for p in sc.profiles}
    for intent in sc.intents:
        if not intent.spec.active:
            continue
        for obj in intent.spec.objectives:
            prof = profiles[obj.profile_key(intent.metadata.namespace)]
            if prof.spec.type is not KPIType.LATENCY:
                continue
            q = prof.spec.latency_percentile / 100.0
            train = observations(path, intent.workload_key, int(max(ks) * 1.3), seed,
                                 obj.name, intent.key)
            test = observations(path, intent.workload_key, holdout, seed + 1000, obj.name,
                                intent.key)
            order = np.argsort(train.times)
            ok_test = test.y < 4000.0
            for k in ks:
                idx = order[:k]
                model = QueueingLatencyRegressor(quantile=q, n_bootstrap=8).fit(train.X[idx],
                                                                                 train.y[idx])
                pred = model.predict(test.X[ok_test])
                truth = test.y[ok_test]
                finite = np.isfinite(pred)
                err = np.abs(pred[finite] - truth[finite]) / truth[finite]
                bound = model.predict_bound(test.X[ok_test])
                covered = float(np.mean(bound[finite] >= truth[finite])) if finite.any() else 0.0
                rows.append({
                    "scenario": sc.name, "intent": intent.key, "objective": obj.name, "k": k,
                    "trained_on": int(model.n_samples_), "held_out": int(ok_test.sum()),
                    "mape": round(float(err.mean()), 4), "p90_ape": round(float(
                        np.quantile(err, 0.9)), 4),
                    "unstable_predictions": int((~finite).sum()),
                    "bound_coverage": round(covered, 3),
                })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[10, 20, 30, 50, 100])
    ap.add_argument("--holdout", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [r for p in SCENARIOS for r in evaluate(p, args.ks, args.holdout, args.seed)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'scenario':<14} {'objective':<12} {'k':>4} {'trained':>7} {'held-out':>8} "
          f"{'MAPE':>7} {'p90 APE':>8} {'bound covers':>12}")
    for r in rows:
        print(f"{r['scenario']:<14} {r['objective']:<12} {r['k']:>4} {r['trained_on']:>7} "
              f"{r['held_out']:>8} {r['mape']:>7.1%} {r['p90_ape']:>8.1%} "
              f"{r['bound_coverage']:>12.0%}")


if __name__ == "__main__":
    main()
