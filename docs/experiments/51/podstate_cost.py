"""Construction time, bytes and attribute-read time of PodState at this checkout against the
generated frozen dataclass with the same fields (the code before 84bd459), 200,000 pods each.
Usage: podstate_cost.py"""
import gc, sys, time, timeit, tracemalloc
sys.path.insert(0, ".")
from planner.domain.state import PodState
from tests.test_pod_state import _Generated


Generated = _Generated   # the same fields with the generated __init__ (the code before)


N = 200_000
names = [f"w-{i}" for i in range(N)]
for cls in (Generated, PodState, Generated, PodState):
    gc.collect()
    tracemalloc.start()
    t = time.process_time()
    pods = [cls(n, "node-1", 1.0, "cpu", True, 0, 12.5, 0.5, "p1", 3.0) for n in names]
    built = time.process_time() - t
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    t = time.process_time()
    for _ in range(5):
        for p in pods:
            p.cpu; p.device; p.pool; p.node; p.ready; p.started_at; p.restarts
    read = (time.process_time() - t) / (5 * 7 * N)
    print(f"{cls.__name__:9} build {built / N * 1e6:.2f} us a pod, {size / N:.0f} bytes a pod "
          f"(the list included), read {read * 1e9:.1f} ns an attribute")
    del pods
for cls in (Generated, PodState):
    n = 200_000
    t = timeit.timeit(lambda: cls("w-1", "node-1", 1.0, "cpu", True, 0, 12.5, 0.5, "p1", 3.0),
                      number=n)
    print(f"{cls.__name__:9} build {t / n * 1e6:.2f} us a pod (timeit, no tracemalloc)")
