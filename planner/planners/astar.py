"""The ``astar`` planner: Intel IDO's A* search over actuator-proposed states, kept as the
reference the default planner has to beat.

What it does, as IDO does:

* **States** are workload configurations. The enabled actuators' :meth:`candidates` expand a
  state (at most ``max_candidates`` per actuator per expansion; at most ``max_states``
  expanded states per plan; IDO: 10 and 2000).
* **Goal test**: every objective that has a predictor is predicted met, judged on the
  predictor's conservative :attr:`Prediction.bound` (and only where the predictor has seen
  something like the candidate, unless ``trust_unsupported``). Objectives without a predictor
  (e.g. power) are left out of the search and named in the reason. ``tolerance`` is not
  used: IDO parses it and ignores it, so does its reference.
* **Action costs** are priority-weighted: an action of actuator ``a`` costs
  ``base[a] * (1 + f)`` with ``f = (1 - priority) / priority`` when it makes the workload dearer
  (IDO's scale-out and CPU-up utilities scale with ``1 / priority``: an important intent grows
  cheaply) and ``f = priority`` otherwise (IDO's ``rmPod`` costs ``availability * priority``:
  an important intent is reluctant to shrink). The base costs (:data:`ACTION_BASE_COST`) rank
  the disruption: pods added or removed < one size of CPU (restarts every pod) < device or pool
  (restarts every pod elsewhere). IDO resizes by restarting pods, and so does its reference:
  the ``cpu`` cost stays where the cluster could resize in place
  (:attr:`planner.domain.state.ClusterSnapshot.in_place_resize`; the default planner counts no
  restart for it there, :mod:`planner.planners.disruption`), so the baseline stays IDO's.
* **Heuristic**: IDO's, the unnormalised Euclidean distance between the predicted objective
  values (means) and the targets, ``sqrt(sum((v_i - t_i)^2))`` in the KPIs' own units
  (milliseconds next to availability fractions), and ``-1 / distance`` for states that already
  meet the goal, so that the state that just meets it is tried first. A configuration that
  cannot carry the load (infinite predicted latency) counts as ``10 x`` the target. The
  heuristic is **inadmissible** on purpose - it overestimates (hundreds of milliseconds against
  action costs below one) and goes negative - so A* with it is close to greedy best-first
  search and may return a goal state that is not the cheapest; that is the behaviour the
  reference must keep (``heuristic="zero"`` gives the exact search, for comparison).

Where it departs from IDO, and why:

* IDO executes the path's actions one by one. Here only the path's final state matters: it is
  the plan's ``target``, and the actions of this cycle come from
  :func:`planner.planners.base.steps_towards`, so the admin's step limits and cooldowns apply
  as for every other planner.
* IDO gets scale-in from ``rmPod``'s sub-unit edge costs and a shortcut edge when the current
  state already meets the goal. Here every goal state has an explicit arc to the virtual goal
  that costs its price in *replica-equivalents* (its cost per hour over the price of one
  replica of the current configuration): A* minimises ``actions + resources`` of the final
  state, so staying over-provisioned costs more than a scale-in, and a state one replica
  cheaper is worth more than an extra action.
* With no goal state within the budgets, the plan heads for the state closest to the goal by
  the heuristic (IDO's opportunistic planning) and the reason says so.

Predictors: the explicit queueing estimates (:mod:`planner.planners.online`) by default; pass
``predictors_for`` to plug in learned models (it returns ``None`` when it has no model for the
context; explicit predictors fill in the objectives it does not cover). Cost objectives are
computed from the node pools' prices.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from planner.domain.cost import cost_per_hour, pool_prices
from planner.domain.intents import KPIType
from planner.domain.plan import Plan, ReasonPart
from planner.domain.state import ClusterSnapshot, WorkloadConfig
from planner.models.predictor import CandidateBatch, FloatArray, Prediction, Predictor
from planner.models.queue_estimate import QueueEstimate
from planner.planners import plan_details
from planner.planners.base import Planner, PlanningContext, clip_target, steps_towards
from planner.planners.online import (
    estimate_memory,
    explicit_predictors,
    recalled_estimate,
    updated_estimate,
)

ACTION_BASE_COST: dict[str, float] = {
    "replicas": 0.2,
    "remove-pod": 0.15,
    "cpu": 0.5,
    "device": 1.0,
    "placement": 1.0,
}
"""Base cost of one action per actuator, in replica-equivalents (see the module docstring)."""
DEFAULT_BASE_COST = 0.5
"""Base cost of an action of an actuator not listed above (third-party ones)."""
INFEASIBLE_FACTOR = 10.0
"""A non-finite predicted value counts as this many times its target in the heuristic."""
GPU_CORE_EQUIVALENT = 8.0
"""Cores one GPU counts as when the cluster has no prices to compare configurations by."""

PredictorsFor = Callable[[PlanningContext], dict[str, Predictor] | None]
Heuristic = Literal["ido", "zero"]


class PricePredictor(Predictor):
    """A cost objective: the configuration's price per hour, computed, not predicted (not
    :attr:`Predictor.monotone`: more replicas cost more)."""

    kind = "computed"
    monotone = False

    def __init__(self, price: Callable[[WorkloadConfig], float]) -> None:
        self.price = price

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        v = np.array([self.price(batch.config(i)) for i in range(len(batch))], dtype=float)
        return Prediction(v, v, np.ones(len(batch), dtype=bool))


@dataclass(frozen=True)
class _Objective:
    name: str
    target: float
    minimize: bool


@dataclass(frozen=True)
class _Node:
    config: WorkloadConfig
    values: dict[str, float]
    """Predicted mean per objective."""
    goal: bool
    h: float
    hold: float
    """Price in replica-equivalents: the cost of the arc from a goal state to the goal."""


@dataclass
class SearchResult:
    """The outcome of one search: the chosen state and how it was found."""

    node: _Node
    found: bool
    """``True``: a state predicted to meet every objective."""
    exhausted: bool
    """``True``: the state budget ran out before the search finished."""
    expanded: int
    path: list[tuple[str, WorkloadConfig]] = field(default_factory=list)
    """(actuator, state) along the path from the current configuration."""


class _Prices:
    """Price per hour of a configuration, memoised per (pool, device) for one snapshot."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self._table: dict[tuple[str | None, str], tuple[float, float]] = {}

    def __call__(self, cfg: WorkloadConfig) -> float:
        key = (cfg.pool, cfg.device)
        if key not in self._table:
            self._table[key] = pool_prices(self.snapshot, cfg.pool, cfg.device)
        core, gpu = self._table[key]
        return cfg.replicas * (cfg.cpu * core + (gpu if cfg.device == "gpu" else 0.0))


class AStarPlanner(Planner):
    name = "astar"

    def __init__(self, max_states: int = 2000, max_candidates: int = 10,
                 predictors_for: PredictorsFor | None = None, heuristic: Heuristic = "ido",
                 action_costs: Mapping[str, float] | None = None,
                 trust_unsupported: bool = False) -> None:
        if max_states < 1 or max_candidates < 1:
            raise ValueError("max_states and max_candidates must be >= 1")
        if action_costs is not None and any(c < 0 for c in action_costs.values()):
            raise ValueError("action costs must be >= 0")
        self.max_states = max_states
        self.max_candidates = max_candidates
        self.predictors_for = predictors_for
        self.heuristic = heuristic
        self.action_costs = dict(ACTION_BASE_COST if action_costs is None else action_costs)
        self.trust_unsupported = trust_unsupported
        self.last: SearchResult | None = None
        """The last search (for tests and debugging; not memory: no decision reads it)."""

    # ------------------------------------------------------------------ predictors
    def predictors(self, ctx: PlanningContext, prices: _Prices,
                   est: QueueEstimate | None) -> dict[str, Predictor]:
        out: dict[str, Predictor] = {}
        if est is not None:
            out.update(explicit_predictors(ctx, est))
        if self.predictors_for is not None:
            learned = self.predictors_for(ctx)
            if learned:
                out.update(learned)
        for o in ctx.intent.spec.objectives:
            if o.name not in out and ctx.profiles[o.name].spec.type is KPIType.COST:
                out[o.name] = PricePredictor(prices)
        return out

    # ------------------------------------------------------------------ plan
    def plan(self, ctx: PlanningContext) -> Plan:
        self.last = None
        on_hold = plan_details.hold_if_unknown(ctx, self.name)
        if on_hold is not None:
            return on_hold
        est = updated_estimate(ctx, recalled_estimate(ctx.memory.get("estimate")))
        plan = self._plan(ctx, est)
        return replace(plan, memory={"estimate": estimate_memory(est)})

    def _plan(self, ctx: PlanningContext, est: QueueEstimate | None) -> Plan:
        cfg = ctx.config
        prices = _Prices(ctx.snapshot)
        preds = self.predictors(ctx, prices, est)
        if ctx.workload.request_rate is None:
            return plan_details.no_action(ctx, self.name, "unknown",
                                          "no action: request rate unknown", preds)
        objectives = [_Objective(o.name, o.value, ctx.profiles[o.name].spec.minimizes)
                      for o in ctx.intent.spec.objectives if o.name in preds]
        if not objectives:
            return plan_details.no_action(
                ctx, self.name, "no-model",
                "no action: load too low to estimate the service rate", preds)
        rate = ctx.workload.request_rate * (1.0 + ctx.admin.headroom)
        result = self.search(ctx, objectives, preds, rate, prices)
        self.last = result
        chosen = result.node.config
        target = clip_target(ctx, chosen)
        actions = steps_towards(ctx, target)
        parts = (*self._reason(ctx, result, target, preds, objectives, rate),
                 *plan_details.held_parts(ctx, actions))
        predicted = {k: v for k, v in result.node.values.items() if math.isfinite(v)}
        return Plan(ctx.intent.key, self.name, cfg, target, tuple(actions), predicted,
                    cost_per_hour(target, ctx.snapshot), planned_rate=rate,
                    chosen=chosen if chosen != target else None,
                    steps=plan_details.plan_steps(ctx, actions, target, preds, rate),
                    models=plan_details.models_used(ctx, preds), reason_parts=parts)

    def _reason(self, ctx: PlanningContext, r: SearchResult, target: WorkloadConfig,
                preds: Mapping[str, Predictor], objectives: Sequence[_Objective],
                rate: float) -> tuple[ReasonPart, ...]:
        kinds = "/".join(sorted({preds[o.name].kind for o in objectives}))
        budget = (f"{r.expanded} state(s) expanded of at most {self.max_states}, "
                  f"{self.max_candidates} candidate(s) per actuator")
        what = _describe(target, ctx.config)
        if r.found and not r.exhausted:
            head = (f"A*: {what} predicted to meet every objective at {rate:.0f} req/s "
                    f"({kinds} model), path of {len(r.path)} step(s)")
        elif r.found:
            head = (f"A*: state budget reached; best goal state found so far: {what} "
                    f"({kinds} model), path of {len(r.path)} step(s)")
        else:
            head = (f"A*: no state predicted to meet every objective at {rate:.0f} req/s "
                    f"({kinds} model) within the budget; heading for the closest by heuristic: "
                    f"{what} (distance {r.node.h:.3g})")
        left_out = [o.name for o in ctx.intent.spec.objectives
                    if o.name not in {x.name for x in objectives}]
        tail = ((ReasonPart("no-model", f"not predicted: {', '.join(left_out)}"),)
                if left_out else ())
        return (ReasonPart("choice", head), ReasonPart("search", budget), *tail)

    # ------------------------------------------------------------------ search
    def action_cost(self, actuator: str, priority: float, dearer: bool) -> float:
        """``base * (1 + f)``: ``f = (1 - priority) / priority`` for a change that makes the
        workload dearer, ``f = priority`` otherwise (see the module docstring)."""
        base = self.action_costs.get(actuator, DEFAULT_BASE_COST)
        factor = (1.0 - priority) / priority if dearer else priority
        return base * (1.0 + factor)

    def search(self, ctx: PlanningContext, objectives: Sequence[_Objective],
               preds: Mapping[str, Predictor], rate: float,
               prices: Callable[[WorkloadConfig], float]) -> SearchResult:
        start = ctx.config
        priority = ctx.intent.spec.priority
        unit = prices(start.with_(replicas=1))
        unit_cores = max(start.cpu, 1e-9)

        def hold(c: WorkloadConfig) -> float:
            if unit > 0:
                return prices(c) / unit
            gpu = GPU_CORE_EQUIVALENT if c.device == "gpu" else 0.0
            return c.replicas * (c.cpu + gpu) / unit_cores

        nodes: dict[WorkloadConfig, _Node] = {}

        def evaluate(configs: Sequence[WorkloadConfig]) -> None:
            new = list(dict.fromkeys(c for c in configs if c not in nodes))
            if not new:
                return
            batch = CandidateBatch.of(new)
            goal = np.ones(len(new), dtype=bool)
            sq = np.zeros(len(new))
            means: dict[str, FloatArray] = {}
            for o in objectives:
                p = preds[o.name].predict(batch, rate)
                mean = np.asarray(p.mean, dtype=float)
                bound = np.asarray(p.bound, dtype=float)
                with np.errstate(invalid="ignore"):
                    met = (bound <= o.target) if o.minimize else (bound >= o.target)
                met &= np.isfinite(bound)
                if not self.trust_unsupported:
                    met &= np.asarray(p.supported, dtype=bool)
                goal &= met
                capped = np.where(np.isfinite(mean), mean,
                                  INFEASIBLE_FACTOR * max(abs(o.target), 1.0))
                sq += (capped - o.target) ** 2
                means[o.name] = mean
            dist = np.sqrt(sq)
            for i, c in enumerate(new):
                d = float(dist[i])
                if self.heuristic == "zero":
                    h = 0.0
                elif goal[i]:
                    h = -1.0 / d if d > 0 else 0.0
                else:
                    h = d
                nodes[c] = _Node(c, {k: float(v[i]) for k, v in means.items()},
                                 bool(goal[i]) and within(c), h, hold(c))

        bounds = ctx.admin.replicas
        devices = set(ctx.admin.devices)

        def within(c: WorkloadConfig) -> bool:
            """A state inside this intent's bounds (the admin's, narrowed by its use case:
            :mod:`planner.domain.use_case`); the actuators propose within the admin's only."""
            return c.device in devices and (c.replicas == start.replicas
                                            or bounds.min <= c.replicas <= bounds.max)

        def edge(actuator: str, src: WorkloadConfig, dst: WorkloadConfig) -> float:
            return self.action_cost(actuator, priority, nodes[dst].hold > nodes[src].hold + 1e-12)

        evaluate([start])
        g: dict[WorkloadConfig, float] = {start: 0.0}
        parent: dict[WorkloadConfig, tuple[WorkloadConfig, str]] = {}
        tie = 0
        # (f, tie, g, state, is the arc from a goal state to the goal)
        heap: list[tuple[float, int, float, WorkloadConfig, bool]] = []
        best_arc: tuple[float, WorkloadConfig] | None = None

        def push(c: WorkloadConfig, gc: float) -> None:
            nonlocal tie, best_arc
            n = nodes[c]
            tie += 1
            heapq.heappush(heap, (gc + n.h, tie, gc, c, False))
            if n.goal:
                total = gc + n.hold
                tie += 1
                heapq.heappush(heap, (total, tie, total, c, True))
                if best_arc is None or total < best_arc[0]:
                    best_arc = (total, c)

        push(start, 0.0)
        expanded = 0
        exhausted = False
        answer: WorkloadConfig | None = None
        while heap:
            _, _, gc, s, arc = heapq.heappop(heap)
            if arc:
                if gc <= g[s] + nodes[s].hold + 1e-9:
                    answer = s
                    break
                continue
            if gc > g[s] + 1e-9:
                continue  # stale entry: reached again more cheaply
            if expanded >= self.max_states:
                exhausted = True
                break
            expanded += 1
            succ: list[tuple[str, WorkloadConfig]] = []
            for name, act in ctx.actuators.items():
                cands = act.candidates(ctx.workload, s, limit=self.max_candidates)
                succ.extend((name, c) for c in cands[: self.max_candidates]
                            if c != s and within(c))
            evaluate([c for _, c in succ])
            for name, c in succ:
                ng = gc + edge(name, s, c)
                if ng < g.get(c, math.inf) - 1e-12:
                    g[c] = ng
                    parent[c] = (s, name)
                    push(c, ng)

        found = answer is not None or best_arc is not None
        if answer is None and best_arc is not None:
            answer = best_arc[1]
        if answer is None:
            # IDO's opportunistic planning: the state closest to the goal by the heuristic.
            # Within the intent's bounds when any state reached is (the start may not be).
            reached = [c for c in g if within(c)] or list(g)
            answer = min(reached, key=lambda c: (nodes[c].h if self.heuristic == "ido"
                                                 else _distance(nodes[c], objectives), g[c]))
        path: list[tuple[str, WorkloadConfig]] = []
        c = answer
        while c in parent:
            prev, name = parent[c]
            path.append((name, c))
            c = prev
        path.reverse()
        return SearchResult(nodes[answer], found, exhausted, expanded, path)


def _distance(node: _Node, objectives: Sequence[_Objective]) -> float:
    sq = 0.0
    for o in objectives:
        v = node.values.get(o.name, math.inf)
        v = v if math.isfinite(v) else INFEASIBLE_FACTOR * max(abs(o.target), 1.0)
        sq += (v - o.target) ** 2
    return math.sqrt(sq)


def _describe(cfg: WorkloadConfig, current: WorkloadConfig) -> str:
    parts = [f"{cfg.replicas} replica(s) x {cfg.cpu:g} cpu"]
    if cfg.device != current.device or cfg.device != "cpu":
        parts.append(f"on {cfg.device}")
    if cfg.pool != current.pool or cfg.pool is not None:
        parts.append("anywhere" if cfg.pool is None else f"in pool {cfg.pool}")
    return " ".join(parts)
