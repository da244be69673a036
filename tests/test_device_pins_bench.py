"""``bench/device_pins.py``: the device pinned through the intents' use case, per run."""

from __future__ import annotations

from bench import device_pins


def test_pinning_sets_every_active_intents_device() -> None:
    sc = device_pins.load(device_pins.DEFAULT_SCENARIO)
    for device in device_pins.DEVICES:
        intents = device_pins.pinned(sc, device).intents
        assert intents and all(i.spec.use_case is not None and i.spec.use_case.device == device
                               for i in intents)
        assert all(i.spec.use_case is not None and i.spec.use_case.workload_class == "ai"
                   for i in intents)                      # the rest of the use case is kept


def test_a_pinned_run_runs_only_its_device() -> None:
    gpu = device_pins.run(device_pins.DEFAULT_SCENARIO, "gpu", 1, 900.0)
    cpu = device_pins.run(device_pins.DEFAULT_SCENARIO, "cpu", 1, 900.0)
    assert cpu["gpu_hours"] == 0 and cpu["gpu_share_high_load"] == 0
    assert gpu["gpu_hours"] > 0 and gpu["gpu_share_high_load"] == 1.0
    assert cpu["minutes"] == gpu["minutes"] == 15
    totals = device_pins.summarise([cpu, gpu])
    assert set(totals) == {"cpu", "gpu"} and totals["gpu"]["cost"] == gpu["cost"]


def test_days_back_to_back_split_one_run_by_day() -> None:
    one = device_pins.run(device_pins.DEFAULT_SCENARIO, "gpu", 1, 600.0)
    two = device_pins.run(device_pins.DEFAULT_SCENARIO, "gpu", 1, 600.0, days=2)
    first, second = two["days"]
    assert "days" not in one
    # The first day is the one-day run; the second goes on from it, knowledge kept.
    assert first["cost"] == one["cost"] and first["gpu_hours"] == one["gpu_hours"]
    assert first["violation_minutes"] == one["violation_minutes"]
    assert two["minutes"] == 20 and second["cost"] > 0
    assert abs(first["cost"] + second["cost"] - two["cost"]) < 2e-3
    assert first["violation_minutes"] + second["violation_minutes"] == two["violation_minutes"]
    per = device_pins.summarise_days([two, {**two, "seed": 2}])
    assert set(per) == {"gpu"} and per["gpu"][1]["cost"] == round(2 * second["cost"], 3)
