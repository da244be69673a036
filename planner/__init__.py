"""intent-planner: declare what a workload needs; the planner decides how much.

Subpackages, one layer each (front-ends -> control -> planners -> models | actuators |
knowledge -> domain; checked by import-linter): ``domain``, ``models``, ``kpi``, ``planners``,
``control``, and the front-ends ``cli``, ``api``, ``k8s``. The README's Layout table lists them.
"""

__version__ = "0.1.0"
