"""Cooldown for actuators whose changes restart pods (CPU size, device, pool), kept in the
actuator's memory of the intent (``{"last_change": time}``)."""

from __future__ import annotations

from planner.domain.memory import Memory


class Cooldown:
    """After any change to a workload, no further change for ``seconds``.

    Changes that restart every pod are disruptive in both directions, so unlike the replica
    count's anti-flapping rule this holds back any change, not only a reversal.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    @staticmethod
    def record(memory: Memory, now: float) -> Memory:
        """``memory`` after a change at ``now``."""
        return {**memory, "last_change": now}

    def remaining(self, memory: Memory, now: float) -> float:
        """Seconds left before the next change may be made (0: free to change)."""
        last = memory.get("last_change")
        if last is None:
            return 0.0
        return max(0.0, self.seconds - (now - float(last)))

    def why_held(self, memory: Memory, now: float, what: str) -> str | None:
        """A one-line reason if a change is held back, else ``None``."""
        if self.remaining(memory, now) <= 0.0:
            return None
        last = float(memory["last_change"])
        return (f"{what} held: {now - last:.0f}s since the last change < cooldown "
                f"{self.seconds:.0f}s (it restarts pods)")
