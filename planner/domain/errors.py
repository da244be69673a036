"""Error kinds shared by every layer.

Two kinds, as in controller-runtime: a :class:`TemporaryError` is retried with backoff
(a dependency is down), a :class:`PermanentError` is reported (bad input) and not retried.
"""

from __future__ import annotations


class IntentPlannerError(Exception):
    """Base of every error this project raises on purpose."""


class TemporaryError(IntentPlannerError):
    """A dependency failed; the same call may succeed later."""


class PermanentError(IntentPlannerError):
    """The input is wrong; retrying the same input cannot succeed."""


class SpecError(PermanentError):
    """A user-supplied document is invalid.

    ``field`` is the dotted path of the offending field (``spec.objectives[0].value``),
    ``fix`` says what to do about it. ``str()`` is one line suitable for a terminal.
    """

    def __init__(self, source: str, field: str, problem: str, fix: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(self.line())

    def line(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}{self.field}: {self.problem}; fix: {self.fix}"
