# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The plan document (design §13): the seam between deciding (``plan.yml``) and doing (``apply.yml``).

A :class:`Plan` holds everything fleet-wide that a run decides: the normalised fleet it was made from (with a digest
per section and per cluster), every replica record, the placement's outcome (status, shortfalls, what it drops), the
rollout budgets, and the routing weights that follow from the placement. ``plan.yml`` (never sliced) makes it and
writes it as JSON (deterministic key order); ``apply.yml`` reads it and renders or applies only the clusters of its
play, so AWX job slices, ``--limit`` and parallel workflow branches apply one decision and never decide themselves.

An apply refuses a plan

* of a version it does not know;
* made from another fleet: a section (fleet identity, classes, deployments, caches) or a cluster of the apply's
  inventory whose digest differs from the plan's (each named, with both digests), or a cluster the plan does not know;
* older than the plan last recorded on one of its clusters (``created_at``; a record of the same ``plan_id`` is the
  same plan applied again).

The plan's ``created_at`` is sticky: a plan whose content (``plan_id``) equals the previous plan's keeps its time, so
re-planning an unchanged fleet changes nothing anywhere.

Pure: no I/O. The action ``fleet_plan`` reads and writes the file, ``fleet_apply`` / ``fleet_manifests`` write the
per-cluster records.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import LABEL_FLEET, PLAN_RECORD_OWNER
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError

PLAN_VERSION = 1
#: Where the plan lives in a render directory (never a cluster directory: nothing under it is synced as objects).
FLEET_DIR = "_fleet"
PLAN_FILE = "plan.json"
#: ``<render_dir>/_fleet/applied/<fleet>/<cluster>.json``: the plan each cluster's files were last rendered from.
APPLIED_DIR = "applied"
#: The fleet sections whose digests an apply compares with its inventory (``candidate_clusters`` excluded: a job
#: slice's inventory resolves host patterns over its own hosts only).
SECTIONS = ("identity", "classes", "deployments", "caches")
#: What an artifact may carry inline (AWX copies artifacts into every later workflow node's extra vars).
INLINE_LIMIT = 60_000

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _without_targets(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in item.items() if k != "candidate_clusters"} for item in items]


def fleet_digests(fleet: Mapping[str, Any]) -> dict[str, Any]:
    """The digest of each section of a normalised fleet (``fleet_info``'s ``fleet``) and of each cluster."""
    return {
        # The fleet's name only: gpufleet_adopt_unlabelled says how to treat objects found, not what is placed (an
        # adoption run must not make the next run's plan, and every cluster's plan record, new).
        "identity": _digest({"name": fleet.get("name")}),
        "classes": _digest(fleet.get("classes") or {}),
        "deployments": _digest(_without_targets(fleet.get("deployments") or [])),
        "caches": _digest(_without_targets(fleet.get("caches") or [])),
        "clusters": {str(c["name"]): _digest(c) for c in fleet.get("clusters") or []},
    }


def fleet_digest(digests: Mapping[str, Any]) -> str:
    """One digest over every section and cluster digest."""
    return _digest({k: digests[k] for k in (*SECTIONS, "clusters")})


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime(_TIME_FORMAT)


def routing(
    replicas: Iterable[Mapping[str, Any]], deployments: Iterable[Mapping[str, Any]], drained: Iterable[str] = ()
) -> dict[str, dict[str, dict[str, Any]]]:
    """Fleet routing from the placement: per deployment, per cluster holding replicas of it, the placed replicas and a
    ``weight`` proportional to them. A drained cluster's replicas get weight 0 when the deployment has replicas on a
    cluster that is not drained (traffic leaves before the replicas do); otherwise they keep serving (weight as placed,
    ``draining: true``) rather than drop the model's traffic."""
    drained = set(drained)
    counts: dict[str, dict[str, int]] = {}
    for r in replicas:
        per = counts.setdefault(str(r["deployment"]), {})
        per[str(r["cluster"])] = per.get(str(r["cluster"]), 0) + 1
    namespaces = {str(d["name"]): str(d.get("namespace") or "default") for d in deployments}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for dep in sorted(counts):
        per = counts[dep]
        elsewhere = any(c not in drained for c in per)
        out[dep] = {
            cluster: {
                "namespace": namespaces.get(dep, "default"),
                "placed": n,
                "weight": 0 if (cluster in drained and elsewhere) else n,
                "draining": cluster in drained,
                "priority": 0,
            }
            for cluster, n in sorted(per.items())
        }
    return out


@dataclass
class Plan:
    """The plan document. ``fleet`` is the normalised fleet the placement ran on; ``replicas`` every record."""

    fleet_name: str
    fleet: dict[str, Any]
    replicas: list[dict[str, Any]]
    placement: dict[str, Any]
    contract: dict[str, Any] = field(default_factory=dict)
    waves: dict[str, Any] = field(default_factory=dict)
    routing: dict[str, Any] = field(default_factory=dict)
    mode: str = "render"
    capacity: str = "declared"
    created_at: str = ""
    #: The render directory's fingerprint when placement read it. Not written into the document: it is made of file
    #: modification times, so it differs in every clone, and the plan file must be the same bytes wherever it is made.
    render_token: str | None = None
    version: int = PLAN_VERSION
    digests: dict[str, Any] = field(default_factory=dict)
    fleet_digest: str = ""
    plan_id: str = ""

    def __post_init__(self) -> None:
        if not self.digests:
            self.digests = fleet_digests(self.fleet)
        if not self.fleet_digest:
            self.fleet_digest = fleet_digest(self.digests)
        if not self.plan_id:
            self.plan_id = _digest(self._content())

    def _content(self) -> dict[str, Any]:
        """What the plan decides (its identity ``plan_id``): the replicas, routing and budgets for a fleet. Not when it
        was made, nor what it was decided over (the replicas observed, and what the run drops or loses relative to
        them): a re-plan of a fleet that runs as planned is the same plan, so applying it writes nothing."""
        return {
            "version": self.version,
            "fleet_name": self.fleet_name,
            "fleet_digest": self.fleet_digest,
            "replicas": self.replicas,
            "status": self.placement.get("status") or {},
            "waves": self.waves,
            "routing": self.routing,
            "mode": self.mode,
            "capacity": self.capacity,
        }

    @classmethod
    def make(cls, *, previous: Plan | None = None, created_at: str | None = None, **fields: Any) -> Plan:
        """A new plan; it keeps ``previous``'s ``created_at`` when it decides the same (same ``plan_id``)."""
        plan = cls(**fields)
        if previous is not None and previous.plan_id == plan.plan_id:
            plan.created_at = previous.created_at
        else:
            plan.created_at = created_at or now()
        return plan

    # -- serialisation --------------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "fleet_name": self.fleet_name,
            "fleet_digest": self.fleet_digest,
            "digests": self.digests,
            "plan_id": self.plan_id,
            "created_at": self.created_at,
            "mode": self.mode,
            "capacity": self.capacity,
            "contract": self.contract,
            "fleet": self.fleet,
            "replicas": self.replicas,
            "placement": self.placement,
            "waves": self.waves,
            "routing": self.routing,
        }

    def to_json(self) -> str:
        """The document: keys in a fixed order, the fleet's own keys as the inventory gave them (rendering keeps
        the order of a pod template's fields, so a sorted copy would render other bytes than the inventory)."""
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @classmethod
    def from_document(cls, doc: Any, source: str) -> Plan:
        """Read a plan (the parsed JSON, or the JSON text). ``source`` names it in errors (a file, a variable)."""
        if isinstance(doc, (str, bytes)):
            try:
                doc = json.loads(doc)
            except ValueError as exc:
                raise GpufleetError(f"{source}: not a plan document (not JSON: {exc})") from None
        if not isinstance(doc, Mapping):
            raise GpufleetError(f"{source}: not a plan document (a {type(doc).__name__}, not a mapping)")
        version = doc.get("version")
        if version != PLAN_VERSION:
            raise GpufleetError(
                f"{source}: plan version {version!r} is not one this collection reads (it reads version "
                f"{PLAN_VERSION}); make the plan again with this collection's playbooks/plan.yml"
            )
        errors = []
        typed = {
            "fleet_name": str,
            "fleet_digest": str,
            "plan_id": str,
            "created_at": str,
            "fleet": Mapping,
            "replicas": list,
            "placement": Mapping,
            "digests": Mapping,
        }
        for key, kind in typed.items():
            if not isinstance(doc.get(key), kind):
                errors.append((f"{source}.{key}", f"missing or not a {getattr(kind, '__name__', kind)}"))
        for key in ("contract", "waves", "routing"):
            if not isinstance(doc.get(key, {}), Mapping):
                errors.append((f"{source}.{key}", "not a mapping"))
        if errors:
            raise FleetValidationError(errors)
        plan = cls(
            fleet_name=doc["fleet_name"],
            fleet=dict(doc["fleet"]),
            replicas=[dict(r) for r in doc["replicas"] if isinstance(r, Mapping)],
            placement=dict(doc["placement"]),
            contract=dict(doc.get("contract") or {}),
            waves=dict(doc.get("waves") or {}),
            routing=dict(doc.get("routing") or {}),
            mode=str(doc.get("mode") or "render"),
            capacity=str(doc.get("capacity") or "declared"),
            created_at=doc["created_at"],
            digests=dict(doc["digests"]),
        )
        # The document must be what it says it is: digests recomputed from its own fleet, its id from its content.
        if plan.digests != fleet_digests(plan.fleet) or fleet_digest(plan.digests) != doc["fleet_digest"]:
            raise GpufleetError(f"{source}: the plan's fleet does not match its own fleet_digest (edited by hand?)")
        plan.fleet_digest = doc["fleet_digest"]
        if _digest(plan._content()) != doc["plan_id"]:
            raise GpufleetError(f"{source}: the plan's content does not match its plan_id (edited by hand?)")
        plan.plan_id = doc["plan_id"]
        return plan

    # -- what an apply checks -------------------------------------------------------------------------------------

    def clusters(self) -> list[str]:
        return sorted(self.digests.get("clusters") or {})

    def check_inventory(self, fleet: Mapping[str, Any], clusters: Iterable[str], source: str) -> None:
        """Refuse to apply this plan with an inventory it was not made from: each fleet section and each of
        ``clusters`` (the play's) must have the plan's digest. ``fleet`` is the apply's own normalised fleet."""
        mine = fleet_digests(fleet)
        errors = []
        for section in SECTIONS:
            if mine[section] != self.digests.get(section):
                errors.append(
                    (
                        f"{source}.digests.{section}",
                        f"the plan was made ({self.created_at}) from other {_SECTION_NAMES[section]} than this "
                        f"inventory's (plan {str(self.digests.get(section))[:12]}, inventory {mine[section][:12]})",
                    )
                )
        known = self.digests.get("clusters") or {}
        for cluster in sorted(set(clusters)):
            if cluster not in known:
                errors.append(
                    (
                        f"{source}.clusters",
                        f"cluster {cluster} of this play is not in the plan (made {self.created_at}, for "
                        f"{len(known)} cluster(s)): it joined the inventory after the plan was made",
                    )
                )
            elif mine["clusters"].get(cluster) != known[cluster]:
                errors.append(
                    (
                        f"{source}.clusters.{cluster}",
                        f"cluster {cluster} changed in the inventory since the plan was made ({self.created_at}; plan "
                        f"{str(known[cluster])[:12]}, inventory {str(mine['clusters'].get(cluster))[:12]})",
                    )
                )
        if errors:
            errors.append((source, "make the plan again (playbooks/plan.yml) with this inventory, then apply it"))
            raise FleetValidationError(errors)

    def record(self) -> dict[str, str]:
        """What a cluster records of the plan it was last rendered from or applied with."""
        return {
            "plan_id": self.plan_id,
            "created_at": self.created_at,
            "fleet_digest": self.fleet_digest,
            "fleet_name": self.fleet_name,
        }

    def check_recorded(self, recorded: Mapping[str, Any], source: str) -> None:
        """Refuse a plan older than the one last recorded on a cluster (``{cluster: record}``), naming both."""
        errors = []
        for cluster in sorted(recorded):
            rec = recorded[cluster]
            if not isinstance(rec, Mapping):
                continue
            when, pid = str(rec.get("created_at") or ""), str(rec.get("plan_id") or "")
            if pid != self.plan_id and when > self.created_at:
                errors.append(
                    (
                        f"{source}.created_at",
                        f"cluster {cluster} was last applied with a newer plan (made {when}, id {pid[:12]}) than "
                        f"this one (made {self.created_at}, id {self.plan_id[:12]}): applying it would roll the "
                        "cluster back. Apply the newer plan, or make a new one",
                    )
                )
        if errors:
            raise FleetValidationError(errors)

    # -- what a partial apply may remove --------------------------------------------------------------------------

    def held_outside(self, play: Iterable[str], observed: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
        """Deployments this plan removes replicas of on a cluster of ``play`` while their new replicas (in the plan,
        not among ``observed``, the replicas the plan was made over) are on clusters outside it: an apply of ``play``
        alone cannot wait for those to be Ready, so it must not remove anything of them (a drain of a play cluster
        to a cluster of another slice). ``{deployment: [clusters outside the play with new replicas]}``."""
        play = set(play)
        before = {(str(r.get("deployment")), str(r.get("cluster")), r.get("index")) for r in observed}
        now = {(str(r["deployment"]), str(r["cluster"]), r.get("index")) for r in self.replicas}
        removing = {dep for dep, cluster, _i in before - now if cluster in play}
        out: dict[str, set[str]] = {}
        for dep, cluster, _i in now - before:
            if dep in removing and cluster not in play:
                out.setdefault(dep, set()).add(cluster)
        return {d: sorted(c) for d, c in sorted(out.items())}

    def summary(self, path: str | None = None) -> dict[str, Any]:
        """What an AWX artifact carries: the plan's identity, the file it is in, per deployment its status."""
        status = self.placement.get("status") or {}
        out: dict[str, Any] = {
            "version": self.version,
            "fleet_name": self.fleet_name,
            "fleet_digest": self.fleet_digest,
            "plan_id": self.plan_id,
            "created_at": self.created_at,
            "mode": self.mode,
            "clusters": len(self.digests.get("clusters") or {}),
            "replicas": len(self.replicas),
            "status": dict(status),
        }
        if self.placement.get("cold") is not None:
            # Replicas that start before their cache is hydrated (warm_first.py; each with its ETA in placement.cold).
            out["cold_replicas"] = sum(1 for c in self.placement["cold"] if c.get("cold"))
        if path is not None:
            out["path"] = path
        return out


_SECTION_NAMES = {
    "identity": "fleet identity (gpufleet_fleet_name)",
    "classes": "inference classes (gpufleet_inference_classes)",
    "deployments": "model deployments (gpufleet_model_deployments)",
    "caches": "model caches (gpufleet_model_caches)",
}


def plan_record_object(
    record: Mapping[str, Any], fleet_name: str | None, namespace: str = "kube-system"
) -> dict[str, Any]:
    """The ConfigMap an apply-mode run writes on each cluster it applied a plan to (``Plan.record()``; read back by
    the next apply): owned like the serving objects and labelled with the fleet and ``gpufleet.io/plan-record``."""
    labels = dict(PLAN_RECORD_OWNER)
    if fleet_name:
        labels[LABEL_FLEET] = fleet_name
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": plan_record_name(str(record.get("fleet_name") or fleet_name or "")),
            "namespace": namespace,
            "labels": labels,
        },
        "data": {"plan.json": json.dumps(dict(record), sort_keys=True)},
    }


def plan_record_name(fleet_name: str) -> str:
    return f"gpufleet-plan-{fleet_name}"[:253]


def read_record(obj: Any) -> dict[str, Any] | None:
    """The plan record of a ConfigMap / an ``applied/<cluster>.json`` text (untrusted: None when unreadable)."""
    text = obj
    if isinstance(obj, Mapping):
        text = (obj.get("data") or {}).get("plan.json")
    if not isinstance(text, str):
        return None
    try:
        rec = json.loads(text)
    except ValueError:
        return None
    if not isinstance(rec, Mapping) or not all(isinstance(rec.get(k), str) for k in ("plan_id", "created_at")):
        return None
    return {k: str(v) for k, v in rec.items() if isinstance(v, str)}
