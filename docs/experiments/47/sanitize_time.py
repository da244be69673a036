"""Microseconds per document of knowledge.documents.sanitize on the captured documents (run sanitize_docs.py first).
    .venv/bin/python docs/experiments/47/sanitize_time.py"""
import sys, time, pickle, collections
sys.path.insert(0, ".")
from knowledge import documents
docs = pickle.load(open("/tmp/sanitize_docs.pkl", "rb"))
def count(v):
    if isinstance(v, dict): return 1 + sum(count(x) for x in v.values())
    if isinstance(v, (list, tuple)): return 1 + sum(count(x) for x in v)
    return 1
for kind in ("events[0]", "memory", "status"):
    ds = [d for d, w in docs if w == kind]
    t = time.process_time()
    for _ in range(50):
        for d in ds: documents.sanitize(d, kind)
    el = (time.process_time() - t) / 50 / len(ds)
    print(kind, "values", count(ds[0]), f"{el*1e6:.1f} us/doc")
