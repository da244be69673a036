"""``KubernetesIntentSource``: Intents and KPIProfiles from the cluster, status back to it.

Objects come from a :class:`CRStore`: the shared watch cache (:class:`CacheStore`), or in the
operator kopf's index of the same resources (one upstream watch either way). Each object is
validated with :func:`planner.domain.intents.parse_intent` /
:func:`~planner.domain.intents.parse_profile`.
An invalid object does not stop the others: it is left out and reported through the status
subresource, an Intent with the condition ``Invalid=True`` (reason ``InvalidSpec``, the message
naming the field: :meth:`planner.domain.errors.SpecError.line`), a KPIProfile with
``resolved: false`` and the same message. An Intent whose objective is measured by an invalid
KPIProfile is itself ``Invalid`` (the message names the objective and the profile's field); an
Intent whose KPIProfile does not exist is left to the controller, which reports it.

:meth:`KubernetesIntentSource.report` writes the Intent status the controller built
(:func:`planner.domain.status.build_status`, with ``observedGeneration``); KPIProfile statuses
(``resolved``, ``reason``, ``query``, ``observedGeneration``) are written by
:meth:`~KubernetesIntentSource.sync_profiles` (called from :meth:`intents`, i.e. every cycle)
with :func:`planner.k8s.kpi.resolution` against the first Intent using the profile.

Writes are JSON merge patches of ``/status`` computed against what the object has (keys that
disappeared are set to ``null``; kopf's ``status.kopf`` is never touched), and a status is only
written when it differs from the last one written (or, after a restart, from the object's):
no write storms. A condition whose status did not flip keeps the object's
``lastTransitionTime``. Failing writes are logged, never raised.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kubernetes.client import ApiClient, CustomObjectsApi

from planner.domain.errors import IntentPlannerError, SpecError
from planner.domain.intents import Intent, KPIProfile, parse_intent, parse_profile
from planner.domain.ports import IntentSource
from planner.domain.status import FALSE, TRUE, Condition, merge_conditions
from planner.k8s import kpi
from planner.k8s.apierrors import NotFound, api_call
from planner.k8s.resources import INTENTS, KPIPROFILES, ResourceType
from planner.k8s.watchcache import WatchCache
from planner.kpi.templates import DEFAULT_SETTINGS, Resolution, TemplateSettings

log = logging.getLogger(__name__)

Resolver = Callable[[KPIProfile, Intent], Resolution]
StatusKey = tuple[str, str, str]
"""``(plural, namespace, name)``."""


class CRStore(Protocol):
    """Where the source reads custom resources from (read-only objects)."""

    def objects(self) -> list[Mapping[str, Any]]: ...


class CacheStore:
    """The objects of one resource in the shared :class:`WatchCache`."""

    def __init__(self, cache: WatchCache, rtype: ResourceType, wait: float | None = None) -> None:
        self.cache = cache
        self.rtype = rtype
        self.wait = wait
        cache.ensure(rtype)

    def objects(self) -> list[Mapping[str, Any]]:
        return list(self.cache.list(self.rtype, wait=self.wait))


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 merge patch turning ``old`` into ``new`` (``{}``: nothing to change)."""
    patch: dict[str, Any] = {k: None for k in old if k not in new}
    for k, v in new.items():
        before = old.get(k, _MISSING)
        if isinstance(v, Mapping) and isinstance(before, Mapping):
            sub = merge_patch(before, v)
            if sub:
                patch[k] = sub
        elif before is _MISSING or before != v:
            patch[k] = v
    return patch


_MISSING = object()


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def keep_transitions(new: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """``new`` with each condition's ``lastTransitionTime`` taken from ``current`` when its
    status did not flip (the controller may have restarted and forgotten it)."""
    old = {c.get("type"): c for c in current.get("conditions") or () if isinstance(c, Mapping)}
    conds = []
    for c in new.get("conditions") or ():
        prev = old.get(c.get("type"))
        if prev is not None and prev.get("status") == c.get("status") and \
                prev.get("lastTransitionTime"):
            c = {**c, "lastTransitionTime": prev["lastTransitionTime"]}
        conds.append(c)
    out = dict(new)
    if "conditions" in new:
        out["conditions"] = conds
    return out


def _meta(raw: Mapping[str, Any]) -> tuple[str, str, int]:
    meta = raw.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name")), \
        int(meta.get("generation") or 1)


class KubernetesIntentSource(IntentSource):
    """Intents and KPIProfiles of a cluster; see the module docstring."""

    def __init__(self, api_client: ApiClient, intents: CRStore, profiles: CRStore, *,
                 resolver: Resolver | None = None,
                 settings: TemplateSettings = DEFAULT_SETTINGS,
                 clock: Callable[[], float] = time.time, request_timeout_s: float = 15.0) -> None:
        self.api = CustomObjectsApi(api_client)
        self.intent_store = intents
        self.profile_store = profiles
        self.resolver: Resolver = resolver or (lambda p, i: kpi.resolution(p, i, settings))
        self.clock = clock
        self.timeout = request_timeout_s
        self._lock = threading.Lock()
        self._written: dict[StatusKey, dict[str, Any]] = {}
        self._raw: dict[StatusKey, Mapping[str, Any]] = {}
        self._profile_errors: dict[str, str] = {}
        self.invalid: dict[str, str] = {}
        """Intents and KPIProfiles left out, by ``namespace/name``, with the reason."""
        self.writes = 0
        """Status patches sent (for tests and metrics)."""

    # ------------------------------------------------------------------ reading
    def profiles(self) -> dict[str, KPIProfile]:
        valid: dict[str, KPIProfile] = {}
        errors: dict[str, str] = {}
        for raw in self.profile_store.objects():
            ns, name, gen = _meta(raw)
            self._remember(KPIPROFILES, raw)
            if (raw.get("metadata") or {}).get("deletionTimestamp"):
                continue
            try:
                p = parse_profile(raw)
            except SpecError as exc:
                errors[f"{ns}/{name}"] = exc.line()
                self._write(KPIPROFILES, ns, name, {
                    "observedGeneration": gen, "resolved": False,
                    "reason": f"invalid spec: {exc.line()}"}, raw)
                continue
            valid[p.key] = p
        with self._lock:
            self._profile_errors = errors
        return valid

    def intents(self) -> list[Intent]:
        """The valid Intents; invalid ones are reported (``Invalid=True``) and left out."""
        profiles = self.profiles()
        with self._lock:
            bad_profiles = dict(self._profile_errors)
        out: list[Intent] = []
        invalid: dict[str, str] = {f"kpiprofile {k}": v for k, v in bad_profiles.items()}
        for raw in self.intent_store.objects():
            self._remember(INTENTS, raw)
            ns, name, _ = _meta(raw)
            if (raw.get("metadata") or {}).get("deletionTimestamp"):
                continue
            intent, problem = self._check(raw, bad_profiles)
            if intent is not None:
                out.append(intent)
            else:
                invalid[f"{ns}/{name}"] = problem or "invalid"
        self.invalid = invalid
        self.sync_profiles(out, profiles)
        self._forget_missing()
        return out

    def validate_intent(self, raw: Mapping[str, Any]) -> str | None:
        """``None`` if ``raw`` is a valid Intent; else report it ``Invalid`` and say why."""
        with self._lock:
            bad_profiles = dict(self._profile_errors)
        return self._check(raw, bad_profiles)[1]

    def _check(self, raw: Mapping[str, Any],
               bad_profiles: Mapping[str, str]) -> tuple[Intent | None, str | None]:
        ns, name, gen = _meta(raw)
        try:
            intent = parse_intent(raw)
        except SpecError as exc:
            message = exc.line()
        else:
            message = ""
            for i, obj in enumerate(intent.spec.objectives):
                ref = obj.profile_key(ns)
                if ref in bad_profiles:
                    message = (f"spec.objectives[{i}].measuredBy: KPIProfile {ref!r} is invalid: "
                               f"{bad_profiles[ref]}")
                    break
            if not message:
                return intent, None
        current = raw.get("status") or {}
        conditions = merge_conditions(
            list(current.get("conditions") or ()),
            [Condition("Invalid", TRUE, "InvalidSpec", message),
             Condition("Planned", FALSE, "InvalidSpec", "not planned: intent invalid")],
            gen, self.clock())
        self._write(INTENTS, ns, name, {"observedGeneration": gen, "conditions": conditions}, raw)
        return None, message

    # ------------------------------------------------------------------ status
    def report(self, intent: Intent, status: dict[str, object]) -> None:
        ns, name = intent.metadata.namespace, intent.metadata.name
        new = {**status, "observedGeneration": intent.metadata.generation}
        raw = self._raw.get((INTENTS.plural, ns, name)) or {"status": intent.status or {}}
        self._write(INTENTS, ns, name, new, raw)

    def sync_profiles(self, intents: list[Intent] | None = None,
                      profiles: Mapping[str, KPIProfile] | None = None) -> None:
        """Write each valid KPIProfile's ``resolved`` / ``reason`` / ``query``."""
        if profiles is None:
            profiles = self.profiles()
        if intents is None:
            intents = []
            for raw in self.intent_store.objects():
                try:
                    intents.append(parse_intent(raw))
                except SpecError:
                    continue
        users: dict[str, list[Intent]] = {}
        for intent in sorted(intents, key=lambda i: i.key):
            for obj in intent.spec.objectives:
                users.setdefault(obj.profile_key(intent.metadata.namespace), []).append(intent)
        for key, profile in profiles.items():
            using = users.get(key)
            intent = using[0] if using else _template_intent(profile)
            res = self.resolver(profile, intent)
            reason = res.reason if using else f"{res.reason} (not used by any Intent yet)"
            status: dict[str, Any] = {"observedGeneration": profile.metadata.generation,
                                      "resolved": res.resolved, "reason": reason}
            if res.query is not None:
                status["query"] = res.query
            raw = self._raw.get((KPIPROFILES.plural, profile.metadata.namespace,
                                 profile.metadata.name)) or {"status": profile.status or {}}
            self._write(KPIPROFILES, profile.metadata.namespace, profile.metadata.name,
                        status, raw)

    def _remember(self, rtype: ResourceType, raw: Mapping[str, Any]) -> None:
        ns, name, _ = _meta(raw)
        with self._lock:
            self._raw[(rtype.plural, ns, name)] = raw

    def _forget_missing(self) -> None:
        live = {(INTENTS.plural, *_meta(r)[:2]) for r in self.intent_store.objects()}
        live |= {(KPIPROFILES.plural, *_meta(r)[:2]) for r in self.profile_store.objects()}
        with self._lock:
            for key in [k for k in self._raw if k not in live]:
                self._raw.pop(key, None)
                self._written.pop(key, None)

    def _write(self, rtype: ResourceType, ns: str, name: str, new: dict[str, Any],
               raw: Mapping[str, Any]) -> bool:
        """Patch ``status`` to ``new`` unless it already is that; ``True`` if written."""
        key: StatusKey = (rtype.plural, ns, name)
        server = {k: v for k, v in (raw.get("status") or {}).items() if k != "kopf"}
        new = keep_transitions(new, server)
        with self._lock:
            last = self._written.get(key)
        if new == (last if last is not None else server):
            return False
        base = _deep_merge(server, last) if last is not None else server
        patch = merge_patch(base, new)
        if not patch:
            with self._lock:
                self._written[key] = copy.deepcopy(new)
            return False
        try:
            with api_call(f"write status of {rtype.kind} {ns}/{name}"):
                resp: Any = self.api.patch_namespaced_custom_object_status(
                    rtype.group, rtype.version, ns, rtype.plural, name, {"status": patch},
                    _content_type="application/merge-patch+json", _preload_content=False,
                    _request_timeout=self.timeout)
                resp.release_conn()
        except NotFound:
            with self._lock:
                self._written.pop(key, None)
            return False
        except IntentPlannerError as exc:
            log.warning("%s", exc)
            return False
        with self._lock:
            self._written[key] = copy.deepcopy(new)
            self.writes += 1
        return True


def _template_intent(profile: KPIProfile) -> Intent:
    """An Intent standing for "any workload", to show a profile's query template."""
    return parse_intent({
        "apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
        "metadata": {"name": "template", "namespace": profile.metadata.namespace},
        "spec": {"targetRef": {"name": "{workload}"},
                 "objectives": [{"name": "template", "value": 0,
                                 "measuredBy": profile.metadata.name}]}})
