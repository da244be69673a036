"""The Kubernetes implementation of the cluster backend, the intent source and the operator.

* :mod:`planner.k8s.resources` - the resource types the planner reads (group, version, plural).
* :mod:`planner.k8s.projections` - per-resource projections: the fields the planner keeps.
* :mod:`planner.k8s.transport` - raw list/watch HTTP through the official client's ApiClient.
* :mod:`planner.k8s.watchcache` - one shared upstream list+watch per resource type.
* :mod:`planner.k8s.cachemetrics` - the cache's counters as Prometheus metrics.
* :mod:`planner.k8s.quantities` - Kubernetes quantities and label selectors.
* :mod:`planner.k8s.apierrors` - API errors mapped to temporary / permanent errors.
* :mod:`planner.k8s.backend` - ``KubernetesBackend``: observe from the cache, act via the API.
* :mod:`planner.k8s.canary` - a workload's canary as a second Deployment ``<name>-canary``.
* :mod:`planner.k8s.templates` - pod template edits (CPU, node selector) and merge patches.
* :mod:`planner.k8s.devices` - a pod template made a GPU template and back, exactly.
* :mod:`planner.k8s.inplace` - in-place resize: server version, a pod's progress, the patch.
* :mod:`planner.k8s.resizer` - in-place resize of a workload (pods, template without rollout).
* :mod:`planner.k8s.settings` - the backend's settings: GPUs, in-place resize, GPU metrics.
* :mod:`planner.k8s.source` - ``KubernetesIntentSource``: Intents and KPIProfiles, and status.
* :mod:`planner.k8s.kpi` - Prometheus KPIs with availability from pod restarts.
* :mod:`planner.k8s.loadmetrics` - request rate, CPU and GPU utilisation (Prometheus).
* :mod:`planner.k8s.runner` - coalesces planning ticks into one controller cycle.
* :mod:`planner.k8s.health` - ``/healthz``, ``/readyz`` and ``/metrics``.
* :mod:`planner.k8s.operator` - the kopf handlers and the operator wiring.
* :mod:`planner.k8s.command` - the ``intent-planner operator`` command.

Nothing here is imported by the rest of the planner: the controller only sees the
:class:`planner.domain.ports.ClusterBackend`, ``KPISource`` and ``IntentSource`` interfaces.
"""
