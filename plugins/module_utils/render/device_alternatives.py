# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What a replica's pods are told about the ``first_available`` alternative placement chose for them (design.md §14).

Placement resolves a ``first_available`` request per replica (``ResolvedRequest.chosen`` and ``count`` in the record:
"1 x H100, else 2 x A100" records ``chosen: a100, count: 2`` on a pool of A100s). Without this module nothing carried
that choice to the engine: the A100 replica claimed 2 GPUs and ran vLLM with tensor-parallel 1. Now, on every pod of a
member whose claim has a ``first_available`` request:

- the chosen alternative's ``args`` are appended to the engine container (an argument ``--flag=value`` or
  ``--flag value`` replaces the same flag the template sets) and its ``env`` is set (overriding the template's);
- ``GPUFLEET_DEVICE_REQUESTS`` is set: JSON, request name -> ``{"alternative": <chosen or null>, "count": N}``, every
  claimed request of the member, sorted keys (``{"accel": {"alternative": "a100", "count": 2}}``);
- the pod label ``gpufleet.io/devices`` names the choice: ``<request>.<alternative>.<count>`` per first_available
  request, joined by ``_`` (``accel.a100.2``), so ``kubectl get pods -L gpufleet.io/devices`` shows it;
- a vLLM engine whose claim has exactly one request (the accelerators) and that sets ``--tensor-parallel-size``
  nowhere (template or alternative) gets ``--tensor-parallel-size=<count>``: the devices actually claimed.

Members without a ``first_available`` request are left exactly as before (the goldens of the existing shapes do not
change).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import DeviceAlternative, Member
from ansible_collections.gpufleet.serving.plugins.module_utils.plan.records import MemberRecord, ResolvedRequest
from ansible_collections.gpufleet.serving.plugins.module_utils.render.containers import (
    container_tokens,
    flag_value,
    is_shell,
    is_vllm,
    set_env,
)

ENV_DEVICE_REQUESTS = "GPUFLEET_DEVICE_REQUESTS"
LABEL_DEVICES = "gpufleet.io/devices"
TP_FLAGS = ("--tensor-parallel-size", "-tp")
_LABEL_MAX = 63


def chosen(member: Member, mp: MemberRecord, where: str) -> list[tuple[ResolvedRequest, DeviceAlternative]]:
    """The member's claimed ``first_available`` requests with the alternative the record chose, in request order."""
    requests = {r.name: r for r in member.node_selector.devices}
    out: list[tuple[ResolvedRequest, DeviceAlternative]] = []
    for rq in mp.claimed_requests:
        if rq.first_available is None:
            continue
        request = requests.get(rq.name)
        alternatives = {a.name: a for a in (request.first_available or [])} if request is not None else {}
        alt = alternatives.get(rq.chosen or "")
        if alt is None:
            raise GpufleetError(
                f"{where}: the placement chose alternative {rq.chosen!r} of device request {rq.name!r}, which the "
                f"deployment no longer has ({', '.join(alternatives) or 'none'}); place the deployment again"
            )
        out.append((rq, alt))
    return out


def requests_env(mp: MemberRecord) -> str:
    """``GPUFLEET_DEVICE_REQUESTS``: request -> chosen alternative (None for a plain request) and device count."""
    return json.dumps(
        {rq.name: {"alternative": rq.chosen, "count": rq.count} for rq in mp.claimed_requests},
        sort_keys=True,
        separators=(",", ":"),
    )


def devices_label(choices: list[tuple[ResolvedRequest, DeviceAlternative]]) -> str:
    """``accel.a100.2`` (``_``-joined per request); a value over 63 characters keeps a prefix and a short hash."""
    value = "_".join(f"{rq.name}.{alt.name}.{rq.count}" for rq, alt in choices)
    if len(value) <= _LABEL_MAX:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    return f"{value[: _LABEL_MAX - 9].rstrip('._-')}-{digest}"


def _flag(arg: str) -> str | None:
    """The flag an argument sets (``--x=1`` and ``--x`` give ``--x``), or None for a positional value."""
    if not arg.startswith("-"):
        return None
    return arg.split("=", 1)[0]


def _replace_args(args: list[str], extra: list[str]) -> list[str]:
    """``args`` without the flags ``extra`` sets (with their separate value, when given as ``--flag value``), then
    ``extra``."""
    flags = {f for f in (_flag(a) for a in extra) if f}
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        flag = _flag(arg)
        if flag in flags:
            if "=" not in arg and i + 1 < len(args) and not args[i + 1].startswith("-"):
                skip = True
            continue
        out.append(arg)
    return [*out, *extra]


def apply(container: dict[str, Any], member: Member, mp: MemberRecord, where: str) -> dict[str, str]:
    """Tell the engine container of one member's pod what its claim got (see the module docstring); returns the pod
    labels to add (none when the member has no ``first_available`` request)."""
    choices = chosen(member, mp, where)
    if not choices:
        return {}
    extra_args = [a for _rq, alt in choices for a in alt.args]
    shell = is_shell(container)
    if extra_args:
        if shell:
            raise GpufleetError(
                f"{where}: runs a shell script, so the arguments of alternative(s) "
                f"{', '.join(alt.name for _rq, alt in choices if alt.args)} cannot be added; read "
                f"{ENV_DEVICE_REQUESTS} in the script, or give the alternative env instead of args"
            )
        container["args"] = _replace_args([str(a) for a in container.get("args") or []], extra_args)
    for _rq, alt in choices:
        for var in alt.env:
            set_env(container, {"name": var.name, "value": var.value}, override=True)
    set_env(container, {"name": ENV_DEVICE_REQUESTS, "value": requests_env(mp)}, override=True)
    if (
        is_vllm(container)
        and not shell
        and len(mp.claimed_requests) == 1
        and flag_value(container_tokens(container), *TP_FLAGS) is None
    ):
        container["args"] = [
            *(str(a) for a in container.get("args") or []),
            f"--tensor-parallel-size={choices[0][0].count}",
        ]
    return {LABEL_DEVICES: devices_label(choices)}
