"""Node classes in the learned latency model: pods spread over node pools of different speed."""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadConfig, WorkloadState
from planner.models import serialization
from planner.models.effects import KIND_LATENCY, EffectModel, from_document, to_document
from planner.models.latency import N_FIXED, QueueingLatencyRegressor
from planner.models.mix import expected_mix, observed_mix
from planner.models.observations import dataset
from planner.models.predictor import CandidateBatch
from planner.models.sojourn import _survival_terms, mixture_sojourn_quantile
from simulator import queueing

SPEEDS = np.array([1.0, 2.0])
NETWORK = np.array([4.0, 0.0])


def truth(rate: float, replicas: int, share_fast: float, q: float = 0.95) -> float:
    """The simulator's ground truth: capacity-proportional dispatch over slow and fast pods."""
    n_fast = round(replicas * share_fast)
    speeds = np.array([2.0] * n_fast + [1.0] * (replicas - n_fast))
    mu = 24.0 * speeds
    base = 20.0 + np.where(speeds > 1.5, 0.0, 4.0)
    shares = mu / mu.sum()
    out = queueing.step_outcome(rate, shares, mu, base, 5000.0,
                                servers=np.full(replicas, 2, dtype=np.int64))
    value = queueing.quantile(out.components, q)
    assert value is not None
    return value


def sample(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows, ys = [], []
    while len(rows) < n:
        replicas = int(rng.integers(4, 16))
        fast = int(rng.integers(0, replicas + 1))
        cap = 24.0 * (replicas + fast)
        rate = float(rng.uniform(0.3, 0.85)) * cap
        rows.append([rate, replicas, 2.0, 0.0, -1.0, 1 - fast / replicas, fast / replicas])
        ys.append(truth(rate, replicas, fast / replicas))
    return np.asarray(rows), np.asarray(ys) * np.exp(rng.normal(0, 0.01, n))


def test_mixture_quantile_matches_bisection() -> None:
    rng = np.random.default_rng(0)
    n, k = 500, 3
    mu = rng.uniform(5, 200, (n, k))
    c = rng.integers(1, 9, (n, k)).astype(float)
    lam = mu * rng.uniform(0.01, 0.95, (n, k))
    w = rng.dirichlet(np.ones(k), n)
    w[:, 2] = np.where(rng.random(n) < 0.5, 0.0, w[:, 2])
    w /= w.sum(axis=1, keepdims=True)
    t = mixture_sojourn_quantile(0.95, lam, mu, c, w)
    _, s, th, a1, a2 = _survival_terms(lam, mu, c)

    def surv(x: np.ndarray) -> np.ndarray:
        out: np.ndarray = (w * (a1 * np.exp(-s * x[:, None])
                                + a2 * np.exp(-th * x[:, None]))).sum(axis=1)
        return out

    lo, hi = np.zeros(n), np.full(n, 1e6)
    for _ in range(100):
        mid = (lo + hi) / 2
        above = surv(mid) > 0.05
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    np.testing.assert_allclose(t, lo, rtol=1e-6)
    lam[0, 0] = mu[0, 0]                  # one present class saturated: the mixture is too
    w[0] = [0.5, 0.5, 0.0]
    assert np.isinf(mixture_sojourn_quantile(0.95, lam, mu, c, w)[0])


def test_learns_node_speeds_and_beats_the_model_without_them() -> None:
    X, y = sample(60, 1)
    Xt, yt = sample(80, 2)
    with_mix = QueueingLatencyRegressor(n_bootstrap=2).fit(X, y)
    blind = QueueingLatencyRegressor(n_bootstrap=2).fit(X[:, :5], y)
    err = np.abs(with_mix.predict(Xt) - yt) / yt
    err_blind = np.abs(blind.predict(Xt[:, :5]) - yt) / yt
    assert err.mean() < 0.05
    assert err.mean() < 0.5 * err_blind.mean()
    speeds = np.exp(with_mix.theta_[5:7])
    assert speeds[1] / speeds[0] == pytest.approx(2.0, rel=0.1)
    # All pods on the fast class carry more than all on the slow one.
    cap = with_mix.capacity(np.array([[0, 8, 2.0, 0, -1, 1, 0], [0, 8, 2.0, 0, -1, 0, 1]]))
    assert cap[1] / cap[0] == pytest.approx(2.0, rel=0.1)


def _rows_at(shares_fast: list[float], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of 10 pods at half their capacity, with these shares of the pods on the fast
    class, and the simulator's latency for each."""
    rng = np.random.default_rng(seed)
    rows, ys = [], []
    for fast in shares_fast:
        rate = float(rng.uniform(0.3, 0.7)) * 24.0 * (10 + 10 * fast)
        rows.append([rate, 10, 2.0, 0.0, -1.0, 1 - fast, fast])
        ys.append(truth(rate, 10, fast))
    return np.asarray(rows), np.asarray(ys)


def test_a_class_glimpsed_in_one_row_keeps_the_reference_class_speed_and_offset() -> None:
    """A class whose pods carried less than three rows' worth below saturation (its share
    summed over the rows) keeps the reference class's speed and offset: one row whose latency
    is off (here 60 % slow, with a tenth of the pods on the fast class) would otherwise fit two
    free parameters of that class, extrapolated to configurations with every pod on it. Once
    the class carried enough rows, its speed is learned."""
    X, y = _rows_at([0.0] * 30 + [0.1], 7)
    y[-1] *= 1.6
    est = QueueingLatencyRegressor(n_bootstrap=2).fit(X, y)
    assert est.theta_[N_FIXED + 1] == pytest.approx(0.0, abs=1e-6)   # the fast class's log speed
    assert est.theta_[N_FIXED + 2 + 1] == pytest.approx(0.0, abs=1e-6)   # and its offset
    on_it = np.array([[100.0, 10, 2.0, 0.0, -1.0, 0.0, 1.0], [100.0, 10, 2.0, 0.0, -1.0, 1.0, 0.0]])
    pred = est.predict(on_it)
    assert pred[0] == pytest.approx(pred[1])                  # predicted as the reference
    # Rows with half and all of the pods on the fast class: 15 rows' worth, learned.
    X2, y2 = _rows_at([0.0] * 20 + [0.5] * 10 + [1.0] * 10, 8)
    learned = QueueingLatencyRegressor(n_bootstrap=2).fit(X2, y2)
    assert math.exp(learned.theta_[N_FIXED + 1]) == pytest.approx(2.0, rel=0.15)


def test_a_class_seen_only_saturated_is_no_faster_than_its_saturated_rows_allow() -> None:
    """Thirty rows with every pod on the fast class below saturation, four with every pod on
    a class half as fast, saturated (censored at the timeout). Those four rows say only that
    the slow class carried less than it was given: its speed may fall below the reference's,
    to about the fastest the censored rows allow, and its offset stays the reference's.
    Pinned at the reference, the class was predicted to carry 300 requests a second where it
    saturated at 264; fitted free below it, the solve stopped anywhere under the bound (speed
    0.115)."""
    rng = np.random.default_rng(5)
    rows, ys = [], []
    for _ in range(30):
        rate = float(rng.uniform(0.3, 0.8)) * 48.0 * 10
        rows.append([rate, 10, 2.0, 0.0, -1.0, 0.0, 1.0])
        ys.append(truth(rate, 10, 1.0))
    for over in (1.1, 1.3, 1.5, 1.2):
        rows.append([over * 24.0 * 10, 10, 2.0, 0.0, -1.0, 1.0, 0.0])
        ys.append(4000.0)
    X, y = np.asarray(rows), np.asarray(ys)
    est = QueueingLatencyRegressor(n_bootstrap=2).fit(X, y, censored=y >= 4000.0)
    speed = math.exp(est.theta_[N_FIXED])                 # the slow class (column 0)
    assert 0.4 < speed < 0.7                                # truth 0.5, the bound 264/480
    assert est.theta_[N_FIXED + 2] == pytest.approx(0.0, abs=1e-6)   # its offset
    cap = est.capacity(np.array([[0.0, 10, 2.0, 0.0, -1.0, 1.0, 0.0],
                                 [0.0, 10, 2.0, 0.0, -1.0, 0.0, 1.0]]))
    assert cap[0] < 1.1 * 24.0 * 10 * 1.05 and cap[1] > 1.6 * cap[0]
    assert not np.isfinite(est.predict(np.array([[300.0, 10, 2.0, 0.0, -1.0, 1.0, 0.0]]))[0])
    # A warm start from that fit (the trainer's refit) keeps the bound and lands there again.
    again = QueueingLatencyRegressor(n_bootstrap=0).fit(X, y, censored=y >= 4000.0,
                                                        start=est.theta_)
    assert math.exp(again.theta_[N_FIXED]) == pytest.approx(speed, rel=0.05)


def test_round_trip_with_classes_and_inconsistent_documents_refused() -> None:
    X, y = sample(30, 3)
    est = QueueingLatencyRegressor(n_bootstrap=2).fit(X, y)
    model = EffectModel("video/analytics", "p95", KIND_LATENCY, est, (), 1.0, False, {},
                        ("gen-new", "gen-old"))
    doc = to_document(model)
    assert doc["metadata"]["features"][-2:] == ["share:gen-new", "share:gen-old"]
    back = from_document(doc)
    np.testing.assert_allclose(back.estimator.predict(X), est.predict(X))
    assert back.classes == ("gen-new", "gen-old")
    doc["metadata"]["classes"] = ["gen-new"]
    doc["metadata"]["features"] = doc["metadata"]["features"][:-1]
    with pytest.raises(serialization.ModelRefused, match="node classes"):
        from_document(doc)
    import json
    blob = json.loads(to_document(model)["blob"])
    blob["fitted"]["theta_"]["__array__"] = blob["fitted"]["theta_"]["__array__"][:-1]
    bad = {**to_document(model), "blob": json.dumps(blob).encode()}
    with pytest.raises(serialization.ModelRefused, match="theta_"):
        from_document(bad)


def test_features_pin_or_spread_the_pods() -> None:
    X, y = sample(30, 4)
    est = QueueingLatencyRegressor(n_bootstrap=0).fit(X, y)
    model = EffectModel("v/a", "p95", KIND_LATENCY, est, (), 1.0, False, {}, ("slow", "fast"))
    batch = CandidateBatch.of([WorkloadConfig(6, 2.0, "cpu", None),
                               WorkloadConfig(6, 2.0, "cpu", "fast"),
                               WorkloadConfig(6, 2.0, "cpu", "elsewhere")])
    feats = model.features(batch, 200.0, {"slow": 0.5, "fast": 0.5})
    assert feats[:, 5:].tolist() == [[0.5, 0.5], [0.0, 1.0], [0.0, 0.0]]
    assert est.supported(feats).tolist() == [True, True, False]
    pred = est.predict(feats)
    assert pred[1] < pred[0]              # all on fast nodes beats half on slow ones
    # A mix naming a pool the model never saw: unsupported, not silently renormalised.
    other = model.features(batch, 200.0, {"new-gen": 1.0})
    assert not est.supported(other)[0]


def _node(name: str, pool: str) -> NodeState:
    return NodeState(name, pool, "eu", 16.0, 0.0, 0, 0, 0.04, 2.5)


def test_expected_mix_follows_the_pods_or_the_capacity() -> None:
    pods = (PodState("a", "n1", 2.0, "cpu", True, pool="slow"),
            PodState("b", "n2", 2.0, "cpu", True, pool="fast"),
            PodState("c", "n3", 2.0, "cpu", True, pool="fast"),
            PodState("d", None, 2.0, "cpu", False))
    nodes = (_node("n1", "slow"), _node("n2", "fast"), _node("n3", "fast"), _node("n4", "fast"))
    from planner.domain.state import ClusterSnapshot
    snap = ClusterSnapshot(0.0, nodes, {})
    wl = WorkloadState("v", "a", WorkloadConfig(3, 2.0), pods)
    assert expected_mix(wl, snap, "cpu") == pytest.approx({"slow": 1 / 3, "fast": 2 / 3})
    pinned = WorkloadState("v", "a", WorkloadConfig(3, 2.0, pool="slow"), pods)
    assert expected_mix(pinned, snap, "cpu") == pytest.approx({"slow": 0.25, "fast": 0.75})


def test_the_expected_mix_is_per_device() -> None:
    """gen-2173, traced: the workload ran one GPU pod in the GPU pool, unpinned; its CPU
    candidates were given that pod's pool (1.8 ms from the clients) although CPU pods had run
    half in a pool 18 ms away, so the model predicted them at 6 ms and the planner moved to
    CPU pods every few minutes, violating on each. The mix of a device comes from that
    device's ready pods; with none ready, from where they last ran (the planner's memory),
    else from the pools that can host it."""
    gpu_node = NodeState("g1", "gpu", "eu", 32.0, 1.0, 8, 1, 0.05, 1.1)
    nodes = (_node("n1", "near"), _node("n2", "far"), gpu_node)
    snap = ClusterSnapshot(0.0, nodes, {})
    on_gpu = WorkloadState("v", "a", WorkloadConfig(1, 1.0, "gpu"),
                           (PodState("g", "g1", 1.0, "gpu", True, pool="gpu"),))
    assert expected_mix(on_gpu, snap, "gpu") == {"gpu": 1.0}
    assert expected_mix(on_gpu, snap, "cpu") == pytest.approx(
        {"near": 16 / 64, "far": 16 / 64, "gpu": 32 / 64})
    assert expected_mix(on_gpu, snap, "cpu", {"near": 0.5, "far": 0.5}) == {"near": 0.5,
                                                                            "far": 0.5}
    on_cpu = WorkloadState("v", "a", WorkloadConfig(2, 1.0),
                           (PodState("a", "n1", 1.0, "cpu", True, pool="near"),
                            PodState("b", "n2", 1.0, "cpu", True, pool="far")))
    assert observed_mix(on_cpu, "cpu") == {"near": 0.5, "far": 0.5}
    assert observed_mix(on_cpu, "gpu") is None
    assert expected_mix(on_cpu, snap, "gpu") == {"gpu": 1.0}          # only GPU pools


def test_the_old_pods_of_a_device_change_do_not_say_where_unpinned_pods_go() -> None:
    """gen-3238, traced (docs/benchmarks.md section 67): a CPU fleet pinned to the faster pool
    moved to one GPU pod, unpinned; the 2 CPU pods left of it while the GPU pod started were
    read as where unpinned CPU pods run, and a learned model that knew only that pool vouched
    for unpinned CPU pods at its speed. Pods of the device the workload is configured for are
    the ones the scheduler placed unpinned; with none of the other device's placed so, the
    mix of that device is where its pods last ran unpinned, else the capacity guess."""
    gpu_node = NodeState("g1", "gpu", "eu", 32.0, 1.0, 8, 1, 0.05, 1.1)
    nodes = (_node("n1", "slow"), _node("n2", "fast"), gpu_node)
    snap = ClusterSnapshot(0.0, nodes, {})
    moving = WorkloadState("v", "a", WorkloadConfig(2, 1.0, "gpu"),
                           (PodState("a", "n2", 1.0, "cpu", True, pool="fast"),
                            PodState("b", "n2", 1.0, "cpu", True, pool="fast"),
                            PodState("g", "g1", 1.0, "gpu", True, pool="gpu")))
    assert observed_mix(moving, "cpu") is None
    assert observed_mix(moving, "gpu") == {"gpu": 1.0}
    assert expected_mix(moving, snap, "cpu", {"slow": 0.6, "fast": 0.4}) == {"slow": 0.6,
                                                                             "fast": 0.4}
    assert expected_mix(moving, snap, "cpu") == pytest.approx(
        {"slow": 16 / 64, "fast": 16 / 64, "gpu": 32 / 64})


def test_unpinned_gpu_candidates_take_the_gpu_mix() -> None:
    X, y = sample(30, 4)
    est = QueueingLatencyRegressor(n_bootstrap=0).fit(X, y)
    model = EffectModel("v/a", "p95", KIND_LATENCY, est, (), 1.0, False, {}, ("slow", "fast"))
    batch = CandidateBatch.of([WorkloadConfig(6, 2.0, "cpu", None),
                               WorkloadConfig(6, 2.0, "gpu", None),
                               WorkloadConfig(6, 2.0, "gpu", "slow")])
    feats = model.features(batch, 200.0, {"slow": 0.5, "fast": 0.5}, {"fast": 1.0})
    assert feats[:, 5:].tolist() == [[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]]
    same = model.features(batch, 200.0, {"slow": 0.5, "fast": 0.5})
    assert same[:, 5:].tolist() == [[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]]


def test_dataset_has_one_share_column_per_node_pool() -> None:
    def ev(t: float, pools: list[str | None]) -> dict[str, Any]:
        pods = [{"ready": True, "cpu": 2.0, "device": "cpu", "pool": p} for p in pools]
        return {"time": t, "config": {"replicas": len(pools), "cpu": 2.0, "device": "cpu",
                                      "pool": None},
                "resources": {"ready_replicas": len(pools)}, "pods": pods,
                "load": {"request_rate": 100.0}, "current": {"p95": 50.0}}

    mixed: list[str | None] = ["a", "b", "b", None]
    ds = dataset([ev(0, ["a", "b"]), ev(100, ["a", "b"]), ev(200, mixed), ev(300, mixed)],
                 "p95")
    assert ds.classes == ("", "a", "b")
    assert ds.X[:, 5:].tolist() == [[0.0, 0.5, 0.5], [0.25, 0.25, 0.5]]


@functools.cache
def _small_model_document() -> str:
    """One fitted model's document, shared by the refusal cases (each mutates a copy)."""
    X, y = sample(20, 5)
    return serialization.dumps(QueueingLatencyRegressor(n_bootstrap=2).fit(X, y)).decode()


@pytest.mark.parametrize("mutate", [
    lambda b: b["params"].update(quantile="0.95"),
    lambda b: b["params"].update(quantile=1.0),
    lambda b: b["params"].update(bound_quantile=2.0),
    lambda b: b["fitted"].update(residual_scale_=1e3),
    lambda b: b["fitted"]["bootstrap_thetas_"]["__array__"][0].__setitem__(0, float("nan")),
    lambda b: b["fitted"].update(seen_classes_=[7]),
], ids=["quantile-text", "quantile-1", "bound-quantile-2", "huge-residual", "nan-bootstrap",
        "class-out-of-range"])
def test_documents_that_would_fail_at_predict_time_are_refused_at_load(mutate: Any) -> None:
    import json

    blob = json.loads(_small_model_document())
    mutate(blob)
    with pytest.raises(serialization.ModelRefused, match="inconsistent"):
        serialization.loads(json.dumps(blob).encode())


def test_the_batched_jacobian_fits_exactly_what_scipy_alone_fits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = sample(30, 4)
    batched = QueueingLatencyRegressor(n_bootstrap=1, random_state=2).fit(X, y)
    monkeypatch.setattr(QueueingLatencyRegressor, "_batched_jacobian", False)
    alone = QueueingLatencyRegressor(n_bootstrap=1, random_state=2).fit(X, y)
    assert np.array_equal(batched.theta_, alone.theta_)
    assert np.array_equal(batched.bootstrap_thetas_, alone.bootstrap_thetas_)


def _features_row_by_row(model: EffectModel, batch: CandidateBatch, rate: float,
                         mix: dict[str, float] | None,
                         gpu_mix: dict[str, float] | None = None) -> np.ndarray:
    """The model's columns as the code before the per-pool look-up computed them (an
    unpinned GPU row spread as ``gpu_mix`` says, when given)."""
    from planner.models.observations import UNKNOWN_CLASS, pool_code

    codes = np.array([pool_code(p, model.pools) for p in batch.pool], dtype=float)
    base = np.column_stack([np.full(len(batch), rate), batch.replicas, batch.cpu, batch.gpu,
                            codes])
    if not model.classes:
        return base
    index = {c: i for i, c in enumerate(model.classes)}

    def spread_of(m: dict[str, float] | None) -> np.ndarray:
        out = np.zeros(len(model.classes))
        spread = dict(m) if m else {UNKNOWN_CLASS: 1.0}
        if all(k in index for k, v in spread.items() if v > 0):
            for k, v in spread.items():
                if v > 0:
                    out[index[k]] = v
        return out

    shares = np.zeros((len(batch), len(model.classes)))
    for i, pool in enumerate(batch.pool):
        if pool is None:
            shares[i] = spread_of(gpu_mix if gpu_mix is not None and batch.gpu[i] >= 0.5
                                  else mix)
        elif pool in index:
            shares[i, index[pool]] = 1.0
    return np.column_stack([base, shares])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.sampled_from((0.5, 1.0, 2.0)),
                          st.sampled_from(("cpu", "gpu")),
                          st.sampled_from((None, "slow", "fast", "other", "unknown"))),
                max_size=30),
       st.sampled_from(((), ("slow",), ("slow", "fast"), ("fast", "unknown"))),
       st.sampled_from(((), ("slow", "fast"), ("other",))),
       st.one_of(st.none(), st.dictionaries(st.sampled_from(("slow", "fast", "new", "unknown")),
                                            st.sampled_from((0.0, 0.25, 0.5, 1.0, -1.0)))),
       st.one_of(st.floats(0.0, 1e4), st.sampled_from((1e6, np.inf))),
       st.one_of(st.none(), st.dictionaries(st.sampled_from(("slow", "fast", "gpu")),
                                            st.sampled_from((0.0, 0.5, 1.0)))))
def test_features_per_pool_equal_the_row_by_row_columns(
        rows: list[tuple[int, float, str, str | None]], classes: tuple[str, ...],
        pools: tuple[str, ...], mix: dict[str, float] | None, rate: float,
        gpu_mix: dict[str, float] | None) -> None:
    model = EffectModel("v/a", "p95", KIND_LATENCY, None, pools, 1.0, False, {}, classes)
    batch = CandidateBatch.of([WorkloadConfig(*r) for r in rows])
    got = model.features(batch, rate, mix, gpu_mix)
    want = _features_row_by_row(model, batch, rate, mix, gpu_mix)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def _mix_pod_by_pod(workload: WorkloadState, nodes: tuple[NodeState, ...]) -> dict[str, float]:
    """The expected mix as the code before the pod counts and the pools' cores computed it."""
    from planner.models.observations import UNKNOWN_CLASS

    if workload.config.pool is None:
        counts: dict[str, float] = {}
        for p in workload.pods:
            if p.ready:
                key = p.pool or UNKNOWN_CLASS
                counts[key] = counts.get(key, 0.0) + 1.0
        total = sum(counts.values())
        if total > 0:
            return {k: v / total for k, v in counts.items()}
    capacity: dict[str, float] = {}
    for n in nodes:
        capacity[n.pool] = capacity.get(n.pool, 0.0) + n.cpu_capacity
    total = sum(capacity.values())
    if total <= 0:
        return {UNKNOWN_CLASS: 1.0}
    return {k: v / total for k, v in capacity.items()}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from((None, "", "a", "b", "c")), st.booleans(),
                          st.sampled_from((0.5, 1.0)), st.booleans()), max_size=20),
       st.lists(st.tuples(st.sampled_from(("a", "b", "c")),
                          st.sampled_from((0.0, 1.5, 8.0, 32.0, 0.1))), max_size=8),
       st.sampled_from((None, "a")))
def test_the_expected_mix_from_pod_counts_equals_counting_each_pod(
        pods: list[tuple[str | None, bool, float, bool]], nodes: list[tuple[str, float]],
        pin: str | None) -> None:
    workload = WorkloadState("ns", "w", WorkloadConfig(len(pods), 1.0, "cpu", pin), tuple(
        PodState(f"p{i}", "n0" if on else None, cpu, ready=ready, pool=pool)
        for i, (pool, ready, cpu, on) in enumerate(pods)))
    cluster = tuple(NodeState(f"n{i}", pool, "r", cap, 0.0) for i, (pool, cap) in enumerate(nodes))
    got = expected_mix(workload, ClusterSnapshot(0.0, cluster, {}), "cpu")
    want = _mix_pod_by_pod(workload, cluster)
    assert list(got.items()) == list(want.items())


def test_the_mix_a_device_last_had_is_planner_memory() -> None:
    """Where a device's pods last ran is remembered as data (persisted, restored after a
    restart), so the workload that now runs only GPU pods still predicts its CPU pods where
    they ran."""
    import json

    from planner.domain.memory import plain
    from planner.planners.predictors import PredictorMemory

    mem = PredictorMemory(mixes={"cpu": {"near": 0.5, "far": 0.5}})
    doc = json.loads(json.dumps(plain(mem.as_memory())))
    assert PredictorMemory.recall(doc).mixes == {"cpu": {"near": 0.5, "far": 0.5}}
    assert PredictorMemory.recall({}).mixes == {}
    assert PredictorMemory.recall({"mixes": "junk"}).mixes == {}


def _device_rows(pairs: list[tuple[float, int]], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of pods all on one of two node classes: ``(gpu, class)`` per row, at loads
    between a third and four fifths of the pods' capacity (GPU pods 10x as fast)."""
    rng = np.random.default_rng(seed)
    rows, ys = [], []
    for gpu, cls in pairs:
        replicas = int(rng.integers(2, 10))
        mu = 24.0 * (10.0 if gpu else 1.0) * (2.0 if cls else 1.0)
        rate = float(rng.uniform(0.3, 0.8)) * mu * replicas
        rows.append([rate, replicas, 1.0, gpu, -1.0, float(cls == 0), float(cls == 1)])
        ys.append(20.0 + 1000.0 * np.log(20.0) / (mu - rate / replicas))
    return np.asarray(rows), np.asarray(ys)


def _one_row(gpu: float, cls: int) -> np.ndarray:
    return np.array([[50.0, 4, 1.0, gpu, -1.0, float(cls == 0), float(cls == 1)]])


def test_a_device_is_vouched_for_only_on_classes_it_ran_on_until_a_class_ran_both() -> None:
    """GPU pods seen only on class 1 and CPU pods only on class 0: nothing tells class 1's speed
    from the GPU's, so CPU pods on class 1 (and GPU pods on class 0) are not supported. Once a
    class has run both devices, the GPU's factor is measured there and every seen class is
    supported for either device (the model's speeds multiply)."""
    X, y = _device_rows([(0.0, 0)] * 8 + [(1.0, 1)] * 8, seed=3)
    est = QueueingLatencyRegressor(n_bootstrap=0).fit(X, y)
    assert (est.cpu_classes_, est.gpu_classes_) == ([0], [1])
    support = {(gpu, cls): bool(est.supported(_one_row(gpu, cls))[0])
               for gpu in (0.0, 1.0) for cls in (0, 1)}
    assert support == {(0.0, 0): True, (0.0, 1): False, (1.0, 0): False, (1.0, 1): True}
    # The rule survives the model's trip through the knowledge base.
    again = serialization.loads(serialization.dumps(est))
    assert again.supported(np.vstack([_one_row(0.0, 1), _one_row(1.0, 1)])).tolist() == [
        False, True]
    # CPU pods on class 1 as well: the classes are tied together.
    X2, y2 = _device_rows([(0.0, 0)] * 8 + [(1.0, 1)] * 8 + [(0.0, 1)] * 4, seed=4)
    both = QueueingLatencyRegressor(n_bootstrap=0).fit(X2, y2)
    assert all(bool(both.supported(_one_row(gpu, cls))[0])
               for gpu in (0.0, 1.0) for cls in (0, 1))


def test_a_stored_model_naming_classes_it_never_saw_for_a_device_is_refused() -> None:
    X, y = _device_rows([(0.0, 0)] * 8 + [(1.0, 0)] * 4, seed=5)
    doc = json.loads(serialization.dumps(QueueingLatencyRegressor(n_bootstrap=0).fit(X, y)))
    doc["fitted"]["gpu_classes_"] = [1]          # class 1 was never seen at all
    with pytest.raises(serialization.ModelRefused, match="gpu_classes_"):
        serialization.loads(json.dumps(doc).encode())
    doc["fitted"]["gpu_classes_"] = doc["fitted"]["cpu_classes_"] = []   # seen with no device
    with pytest.raises(serialization.ModelRefused, match="cover the seen classes"):
        serialization.loads(json.dumps(doc).encode())
