"""Error kinds shared by every layer.

Two kinds, as in controller-runtime: a :class:`TemporaryError` is retried with backoff
(a dependency is down), a :class:`PermanentError` is reported (bad input) and not retried.
"""

from __future__ import annotations

MAX_PART = 240
"""Longest source, field, problem or fix kept in a :class:`SpecError` (characters)."""


def one_line(text: str, limit: int = MAX_PART) -> str:
    """``text`` on one line of at most ``limit`` characters: control characters (newlines
    included) escaped, the middle of a longer text cut out and marked ``...``."""
    head = text if len(text) <= 4 * limit else text[: 2 * limit] + text[-2 * limit:]
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in head)
    if len(flat) <= limit and len(head) == len(text):
        return flat
    keep = (limit - 3) // 2
    return flat[:keep] + "..." + flat[len(flat) - keep:]


class IntentPlannerError(Exception):
    """Base of every error this project raises on purpose."""


class TemporaryError(IntentPlannerError):
    """A dependency failed; the same call may succeed later."""


class PermanentError(IntentPlannerError):
    """The input is wrong; retrying the same input cannot succeed."""


class SpecError(PermanentError):
    """A user-supplied document is invalid.

    ``field`` is the dotted path of the offending field (``spec.objectives[0].value``),
    ``fix`` says what to do about it. ``str()`` is one line suitable for a terminal: each
    part is kept to :data:`MAX_PART` characters, control characters escaped (the offending
    value is the user's and may be of any size). It is plain text: print it as such (never
    as markup).
    """

    def __init__(self, source: str, field: str, problem: str, fix: str) -> None:
        self.source = one_line(source)
        self.field = one_line(field)
        self.problem = one_line(problem)
        self.fix = one_line(fix)
        super().__init__(self.line())

    def line(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}{self.field}: {self.problem}; fix: {self.fix}"
