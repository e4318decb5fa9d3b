# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The one spelling of a resolved request as Kubernetes reads it: a ResourceClaim's ``spec.devices`` from a replica
record member's requests and constraints (design.md §3a, §12).

The record's snake_case (``device_class_name``, ``first_available``, ``match_attribute``, ``capacity.requests``)
becomes ``resource.k8s.io/v1``'s camelCase; toleration fields are Kubernetes' own already. Rendering
(``render.serving.claim_devices``) and the differential test against kube-scheduler use this one function, so what
placement allocated is what the scheduler is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def exactly(req: Mapping[str, Any]) -> dict[str, Any]:
    """``exactly`` of a request (or one ``firstAvailable`` alternative, without its name)."""
    out: dict[str, Any] = {"deviceClassName": req["device_class_name"]}
    if req.get("allocation_mode") == "All":
        out["allocationMode"] = "All"
    else:
        out["allocationMode"] = "ExactCount"
        out["count"] = req.get("count") or 1
    if req.get("selectors"):
        out["selectors"] = [{"cel": {"expression": cel}} for cel in req["selectors"]]
    if req.get("tolerations"):
        out["tolerations"] = [dict(t) for t in req["tolerations"]]
    if req.get("capacity"):
        out["capacity"] = {"requests": dict(req["capacity"]["requests"])}
    return out


def to_k8s(device_requests: list[Mapping[str, Any]], constraints: list[Mapping[str, Any]]) -> dict[str, Any]:
    """A ResourceClaim's ``spec.devices`` from a member record's claimed ``device_requests`` and ``constraints``:
    ``exactly`` requests, ``firstAvailable`` alternatives (the scheduler picks the first that fits, as placement did),
    ``matchAttribute`` / ``distinctAttribute`` constraints."""
    requests = []
    for req in device_requests:
        alts = req.get("first_available")
        if alts is not None:
            requests.append({"name": req["name"], "firstAvailable": [{"name": a["name"], **exactly(a)} for a in alts]})
        else:
            requests.append({"name": req["name"], "exactly": exactly(req)})
    out: dict[str, Any] = {"requests": requests}
    if constraints:
        out["constraints"] = [
            {
                **({"requests": list(c["requests"])} if c.get("requests") else {}),
                **({"matchAttribute": c["match_attribute"]} if c.get("match_attribute") else {}),
                **({"distinctAttribute": c["distinct_attribute"]} if c.get("distinct_attribute") else {}),
            }
            for c in constraints
        ]
    return out
