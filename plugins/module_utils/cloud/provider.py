# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The seam between the provisioning roles and a cloud: what every provider (``gke.py``, ``eks.py``) gives, and what
they share -- the bounded waiter, the minor release of a version a provider reports, the kubeconfig of an exec
credential plugin and the message of a capacity failure (the failures themselves are classified by
``capacity_ladder.py``: ``Failure``, ``CapacityError``).

The providers take their API clients as arguments (a boto3 client, :class:`gke.ContainerApi`), so nothing here or in
them imports a cloud library; ``gke_client.py`` builds the one client the collection constructs itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ansible_collections.gpufleet.serving.plugins.module_utils.capacity_ladder import Failure
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import KubernetesVersion

Value = TypeVar("Value")


class Provider(Protocol):
    """A cloud the collection provisions clusters on."""

    #: the ``gpufleet_provider`` value
    name: str
    #: what the cloud calls a group of like nodes ("node pool", "nodegroup")
    pool_noun: str
    #: the compute service whose capacity runs out ("Compute Engine", "EC2")
    compute: str
    #: what to do about a capacity failure (the end of its message)
    capacity_advice: str

    def zones_in(self, message: str) -> list[str]:
        """The zones a provider's error message names, sorted."""

    def classify(self, code: str, message: str, machine: str = "", capacity: str = "") -> Failure | None:
        """A stockout or quota failure (capacity_ladder), or None for any other error."""

    def kubeconfig(self, context: str, endpoint: str, ca_data: str, *, cluster: str, location: str) -> dict[str, Any]:
        """A kubeconfig whose user gets its credentials from the provider's CLI."""


@dataclass
class Waiter:
    """How long and how often to poll a long-running change (the modules' ``wait_timeout`` / ``poll_interval``)."""

    timeout: float
    interval: float
    sleep: Callable[[float], None]
    clock: Callable[[], float]


def module_waiter(params: Mapping[str, Any]) -> Waiter | None:
    """The waiter of a module's ``wait_timeout`` / ``poll_interval`` options on the real clock; None when its
    ``wait`` option is off (a module without one always waits)."""
    if not params.get("wait", True):
        return None
    return Waiter(params["wait_timeout"], params["poll_interval"], time.sleep, time.monotonic)


def poll(waiter: Waiter, check: Callable[[], tuple[bool, Value]], expired: Callable[[], str]) -> Value:
    """Call ``check`` until it says done (``(True, value)``; it raises to fail), sleeping ``waiter.interval`` between
    calls; after ``waiter.timeout`` seconds a :class:`GpufleetError` with ``expired()``'s message."""
    deadline = waiter.clock() + waiter.timeout
    while True:
        done, value = check()
        if done:
            return value
        if waiter.clock() >= deadline:
            raise GpufleetError(expired())
        waiter.sleep(waiter.interval)


def minor_version(version: str) -> KubernetesVersion:
    """The minor release of a version a provider reports or is asked for (``1.34.1-gke.1431000``, ``1.35.2`` ->
    1.34, 1.35)."""
    parsed = KubernetesVersion.parse_reported(version)
    if parsed is None:
        raise GpufleetError(f"not a Kubernetes version: {version!r}")
    return parsed.minor_version


def exec_kubeconfig(context: str, server: str, ca_data: str, credential: dict[str, Any]) -> dict[str, Any]:
    """A kubeconfig of one cluster, one user and one context, all named ``context``, whose user runs ``credential``
    (a client.authentication.k8s.io exec block) for its tokens."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": context, "user": {"exec": credential}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
    }


def capacity_message(provider: Provider, pool: str, machine: str, zones: list[str], detail: str) -> str:
    """The one message of a capacity failure: the pool, the machine, the zones (or "unknown zone"), the provider's
    words and what to do."""
    where = ", ".join(zones) or "unknown zone"
    return (
        f"{provider.pool_noun} {pool}: {provider.compute} capacity for {machine} in {where} is not available "
        f"({detail}); {provider.capacity_advice}"
    )
