# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fleet's device vocabulary: a typo in a selector that still compiles is an error, not a silent non-match.

``device.attributes["nvidia.com"].productName`` compiles (any string is a domain) and matches no device, so every
replica of a running model would be dropped. Validation knows what the fleet's inference classes publish: attribute
and capacity names by domain (unqualified names are in the driver's domain, as a ResourceSlice publishes them), drivers
and DeviceClass names. A selector, request or constraint naming something no class publishes is an error with the
field path and the closest known names. Only literal names are checked (``device.attributes[d]`` with ``d`` computed
is left alone), and only references through ``device.attributes`` / ``device.capacity``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.suggest import did_you_mean


@dataclass
class Vocabulary:
    """What the fleet's classes publish: ``{domain: {name}}`` for attributes and capacity, and DeviceClass names."""

    attributes: dict[str, set[str]] = field(default_factory=dict)
    capacity: dict[str, set[str]] = field(default_factory=dict)
    device_classes: set[str] = field(default_factory=set)

    def add(self, table: dict[str, set[str]], driver: str, names: Iterable[str]) -> None:
        for key in names:
            domain, ident = key.rsplit("/", 1) if "/" in key else (driver, key)
            table.setdefault(domain, set()).add(ident)


def fleet_vocabulary(classes: Mapping[str, Any]) -> Vocabulary:
    """The vocabulary of validated inference classes (``models.InferenceClass``): every device entry, its
    per-device ``instances`` included, DRA and Synthetic alike (a selector may read a synthetic device's attributes)."""
    vocab = Vocabulary()
    for cls in classes.values():
        for dev in cls.devices:
            vocab.add(vocab.attributes, dev.driver, dev.attributes)
            vocab.add(vocab.capacity, dev.driver, dev.capacity)
            for inst in dev.instances or []:
                vocab.add(vocab.attributes, dev.driver, inst.attributes)
                vocab.add(vocab.capacity, dev.driver, inst.capacity)
            if dev.device_class_name:
                vocab.device_classes.add(dev.device_class_name)
    return vocab


def _references(node: Any) -> Iterable[tuple[str, str, str | None]]:
    """``(table, domain, name or None)`` for every literal ``device.attributes[domain]`` / ``device.capacity[domain]``
    in a parsed CEL expression, with the name selected from it when that is literal too."""
    from ansible_collections.gpufleet.serving.plugins.module_utils import dra_cel

    def table_of(n: Any) -> str | None:
        if (
            isinstance(n, dra_cel.Select)
            and n.field in ("attributes", "capacity")
            and isinstance(n.operand, dra_cel.Ident)
            and n.operand.name == "device"
        ):
            return str(n.field)
        return None

    def domain_of(n: Any) -> tuple[str, str] | None:
        if isinstance(n, dra_cel.Index) and isinstance(n.index, dra_cel.Const) and isinstance(n.index.value, str):
            table = table_of(n.operand)
            if table:
                return table, n.index.value
        return None

    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        inner = None
        name: str | None = None
        if isinstance(n, dra_cel.Select):
            inner, name = domain_of(n.operand), n.field
        elif isinstance(n, dra_cel.Index) and isinstance(n.index, dra_cel.Const) and isinstance(n.index.value, str):
            inner, name = domain_of(n.operand), n.index.value
        if inner is not None:
            seen.add(id(n.operand))  # its own domain is reported with the name
            yield inner[0], inner[1], name
        else:
            found = domain_of(n)
            if found is not None:
                yield found[0], found[1], None
        for slot in getattr(type(n), "__slots__", ()):
            value = getattr(n, slot, None)
            if isinstance(value, list):
                for item in value:
                    stack.extend(item if isinstance(item, tuple) else (item,))
            elif isinstance(value, tuple):
                stack.extend(value)
            elif hasattr(value, "__slots__") and not isinstance(value, (str, bytes)):
                stack.append(value)


def selector_errors(cel: str, vocab: Vocabulary) -> list[str]:
    """Why ``cel`` names an attribute or capacity no class publishes (empty when it names none, or does not parse:
    compiling reports that)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils import dra_cel

    try:
        tree = dra_cel.parse(cel)
    except (dra_cel.CelSyntaxError, ValueError):
        return []
    out = []
    for table, domain, name in _references(tree):
        known = vocab.attributes if table == "attributes" else vocab.capacity
        what = "attribute" if table == "attributes" else "capacity"
        if domain not in known:
            out.append(
                f"{what} domain {domain!r} is published by no inference class of the fleet"
                + did_you_mean(domain, known, "known domains")
            )
        elif name is not None and name not in known[domain]:
            out.append(
                f"{what} {domain}/{name} is published by no inference class of the fleet"
                + did_you_mean(name, known[domain], f"known in {domain}")
            )
    return sorted(set(out))


def deployment_errors(dep: Any, prefix: str, vocab: Vocabulary) -> list[tuple[str, str]]:
    """Every selector, request ``device_class_name`` and constraint attribute of a validated ``ModelDeployment``
    that names something no class of the fleet publishes, as ``(path, reason)``."""
    errors: list[tuple[str, str]] = []
    for path, cel in dep.selector_paths():
        errors.extend((f"{prefix}.{path}", reason) for reason in selector_errors(cel, vocab))
    for ei, engine in enumerate(dep.engines):
        for mi, member in enumerate(engine.members):
            at = f"{prefix}.engines[{ei}].members[{mi}].node_selector"
            for ri, req in enumerate(member.node_selector.devices):
                subs = [(f"{at}.devices[{ri}]", req)] + [
                    (f"{at}.devices[{ri}].first_available[{ai}]", alt)
                    for ai, alt in enumerate(req.first_available or [])
                ]
                for path, sub in subs:
                    name = getattr(sub, "device_class_name", None)
                    if name and name not in vocab.device_classes:
                        errors.append(
                            (
                                f"{path}.device_class_name",
                                f"DeviceClass {name!r} is requested by no device of the fleet's inference classes"
                                + did_you_mean(name, vocab.device_classes, "known"),
                            )
                        )
            for ci, con in enumerate(member.node_selector.constraints):
                for key in ("match_attribute", "distinct_attribute"):
                    qualified = getattr(con, key, None)
                    if not qualified:
                        continue
                    domain, ident = qualified.rsplit("/", 1)
                    if ident not in vocab.attributes.get(domain, set()):
                        known = sorted(f"{d}/{n}" for d, names in vocab.attributes.items() for n in names)
                        errors.append(
                            (
                                f"{at}.constraints[{ci}].{key}",
                                f"attribute {qualified} is published by no inference class of the fleet"
                                + did_you_mean(qualified, known, "known"),
                            )
                        )
    return errors
