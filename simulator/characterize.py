"""Workload characterisation: an optuna ask/tell study that explores a workload's
configuration space on the simulator and seeds ``events`` and ``effects``, so that a new
workload needs few live observations.

Each trial picks a configuration (replicas, CPU size, device, node pool) and a load level,
holds them on the simulated cluster until the pods are ready and the KPI window holds only that
configuration, measures every objective of the workload's intents, and records the measurement
as an exploratory event. A quasi-random (Sobol) sampler spreads the trials over the space.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna

from knowledge.base import KnowledgeBase
from planner.control.training import Trainer
from planner.domain.intents import Intent, objective_profiles
from planner.domain.ports import StaticIntentSource
from planner.domain.state import WorkloadConfig
from simulator.cluster import SimulatedCluster
from simulator.scenario import Scenario
from simulator.traces import ConstantTrace

optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass(frozen=True)
class CharacterizationResult:
    workload: str
    trials: int
    recorded: int
    models: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "trials": self.trials, "recorded": self.recorded,
                "models": self.models}


def peak_rate(scenario: Scenario, workload: str, seed: int) -> float:
    spec = next(w for w in scenario.spec.workloads if w.key == workload)
    trace = scenario.trace_for(spec, seed)
    step = max(scenario.spec.duration / 500.0, 1.0)
    return max(trace.base_rate(i * step) for i in range(501))


def characterize(
    scenario: Scenario, workload: str, trials: int, knowledge: KnowledgeBase, seed: int = 0,
    end_time: float = 1_767_225_600.0, settle_s: float = 90.0, measure_s: float = 60.0,
    load_range: tuple[float, float] = (0.15, 1.2), train: bool = True,
    on_trial: Callable[[int], None] | None = None,
) -> CharacterizationResult:
    keys = {w.key for w in scenario.spec.workloads}
    if workload not in keys:
        from planner.domain.errors import SpecError

        raise SpecError("", "--workload", f"no workload {workload!r} in the scenario",
                        f"use one of {sorted(keys)}")
    intents: list[Intent] = [i for i in scenario.intents if i.workload_key == workload]
    profiles = {p.key: p for p in scenario.profiles}
    admin = scenario.spec.admin
    per_trial = settle_s + measure_s
    sim = SimulatedCluster(scenario, seed, start_time=end_time - trials * per_trial)
    has_gpu = any(p.gpus > 0 for p in scenario.spec.cluster.pools)
    pools = ["any", *sorted(p.name for p in scenario.spec.cluster.pools)]
    devices = ["cpu", "gpu"] if has_gpu and "gpu" in admin.devices else ["cpu"]
    peak = peak_rate(scenario, workload, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.QMCSampler(qmc_type="sobol", scramble=True, seed=seed)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    w = sim.workloads[workload]
    recorded = 0
    for n in range(trials):
        trial = study.ask()
        cfg = WorkloadConfig(
            trial.suggest_int("replicas", max(1, admin.replicas.min), admin.replicas.max),
            float(trial.suggest_categorical("cpu", list(admin.cpu.sizes))),
            str(trial.suggest_categorical("device", devices)),
            None if (p := str(trial.suggest_categorical("pool", pools))) == "any" else p,
        )
        rate = peak * trial.suggest_float("load", *load_range)
        if cfg.device == "gpu" and cfg.pool is not None and sim.pools[cfg.pool].gpus == 0:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)  # cannot be scheduled
            continue
        w.trace = ConstantTrace(rate)
        sim.scale(workload, cfg.replicas)
        sim.resize(workload, cfg.cpu)
        sim.set_device(workload, cfg.device)
        sim.place(workload, cfg.pool)
        steps = round(per_trial / scenario.spec.step_s)
        for _ in range(steps):
            sim.step(scenario.spec.step_s)
        snap = sim.observe()
        state = snap.workloads[workload]
        latency = math.inf
        for intent in intents:
            by_objective = objective_profiles(intent, profiles)[0]
            current = {o.name: sim.measure(intent, by_objective[o.name])
                       for o in intent.spec.objectives}
            knowledge.record_event({
                "time": snap.time, "intent": intent.key, "workload": workload,
                "current": current, "desired": {o.name: o.value for o in intent.spec.objectives},
                "config": state.config.as_dict(),
                "load": {"request_rate": rate, "cpu_utilization": state.cpu_utilization},
                "pods": [p.as_dict() for p in state.pods],
                "resources": {"cpu_per_pod": cfg.cpu, "device": cfg.device,
                              "ready_replicas": state.ready_replicas},
                "nodes": {n.name: {"pool": n.pool, "region": n.region} for n in snap.nodes
                          if any(p.node == n.name for p in state.pods)},
                "plan": None, "planner": "characterize", "exploratory": True,
                "characterization": True, "applied": True,
            })
            recorded += 1
            for o in intent.spec.objectives:
                v = current.get(o.name)
                if v is not None and by_objective[o.name].spec.type.value == "latency":
                    latency = min(latency, v)
        study.tell(trial, latency if math.isfinite(latency) else 1e9)
        if on_trial is not None:
            on_trial(n + 1)
    models: list[dict[str, Any]] = []
    if train:
        trainer = Trainer(knowledge, StaticIntentSource(intents, scenario.profiles))
        for intent in intents:
            for m in trainer.train(intent, profiles, sim.time):
                models.append({"intent": m.intent, "objective": m.objective, "kind": m.kind,
                               "samples": m.samples,
                               "validation": m.metadata.get("validation")})
    return CharacterizationResult(workload, trials, recorded, models)
