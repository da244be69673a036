"""Health checks shared by ``/readyz`` and ``/metrics``."""

from __future__ import annotations

from planner.api import schemas
from planner.api.runtime import Runtime

PROBE_INTENT = "(readiness-probe)"
"""An intent key no intent can have: counting its events is a cheap indexed read."""


def knowledge_base(runtime: Runtime | None) -> tuple[bool, str]:
    """Whether the knowledge base answers a read now."""
    if runtime is None:
        return False, "no runtime"
    kb = runtime.knowledge
    try:
        kb.count_events(PROBE_INTENT)
    except Exception as exc:  # a probe reports, it does not fail
        return False, f"unavailable: {exc}"
    if getattr(kb, "healthy", True) is False:
        return False, f"unavailable: {getattr(kb, 'last_error', None) or 'last call failed'}"
    return True, "answers"


def readiness(runtime: Runtime | None) -> schemas.ReadyOut:
    if runtime is None:
        return schemas.ReadyOut(ready=False, checks={
            "controller": schemas.CheckOut(ok=False, detail="the runtime is not started")})
    cycles = runtime.cycles
    if not runtime.looping:  # ``serve``: a cluster held still; what it serves is the KB's
        controller = schemas.CheckOut(ok=True, detail=f"held still after {cycles} cycle(s) "
                                                      "(serve)")
    else:
        controller = schemas.CheckOut(
            ok=cycles >= 1, detail=f"{cycles} cycle(s) completed" if cycles
            else "no controller cycle completed yet")
    ok, detail = knowledge_base(runtime)
    kb = schemas.CheckOut(ok=ok, detail=detail)
    return schemas.ReadyOut(ready=controller.ok and kb.ok,
                            checks={"controller": controller, "knowledge_base": kb})
