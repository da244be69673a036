"""Cooldown bookkeeping for actuators whose changes restart pods (CPU size, device, pool)."""

from __future__ import annotations


class Cooldown:
    """After any change to a workload, no further change for ``seconds``.

    Changes that restart every pod are disruptive in both directions, so unlike the replica
    count's anti-flapping rule this holds back any change, not only a reversal.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._last: dict[str, float] = {}

    def record(self, workload: str, now: float) -> None:
        self._last[workload] = now

    def remaining(self, workload: str, now: float) -> float:
        """Seconds left before the next change may be made (0: free to change)."""
        last = self._last.get(workload)
        if last is None:
            return 0.0
        return max(0.0, self.seconds - (now - last))

    def why_held(self, workload: str, now: float, what: str) -> str | None:
        """A one-line reason if a change is held back, else ``None``."""
        if self.remaining(workload, now) <= 0.0:
            return None
        last = self._last[workload]
        return (f"{what} held: {now - last:.0f}s since the last change < cooldown "
                f"{self.seconds:.0f}s (it restarts pods)")
