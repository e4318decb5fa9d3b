# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The plan per cluster (``plan_cluster()``): Helm releases in install order with their values, fabric components
chosen from the classes, GKE's NVIDIA driver installer DaemonSets, the plain objects (namespaces, the critical-pods
quota, DeviceClasses no chart ships, KServe presets, the Gateway) and the warnings.

Part of the serving stack; ``serving_stack.py`` is the façade other code imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    GPU_TOLERATION,
    NODE_POOL_LABEL,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import (
    InferenceClass,
    parse,
    require_pydantic,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.provider_rules import GKE_DRIVER_OFF
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.apply import (
    _meta,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.render import (
    render_objects,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.stack.versions import (
    COMPONENT_TITLES,
    COMPONENTS,
    COMPUTE_DOMAIN_DRIVER,
    FABRIC_COMPONENTS,
    GKE_DRIVER,
    GKE_DRIVER_VERSION_LABEL,
    GPU_DRIVER,
    KSERVE_API_VERSION,
    OPTIONAL_COMPONENTS,
    PRESETS,
    ChartPin,
    GkeDriverPin,
    GkeDriverVersion,
    StackCluster,
    StackOptions,
    deep_merge,
    parse_versions,
)


def _cel_driver(drivers: list[str]) -> str:
    return " || ".join(f'device.driver == "{d}"' for d in sorted(drivers))


# --------------------------------------------------------------------------------------------------------------------
# The plan of one cluster
# --------------------------------------------------------------------------------------------------------------------


def _pool_affinity(pools: list[str]) -> dict[str, Any]:
    """A node affinity to the nodes of these fleet pools."""
    term = {"matchExpressions": [{"key": NODE_POOL_LABEL, "operator": "In", "values": sorted(pools)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _component_values(
    name: str,
    pin: ChartPin,
    options: StackOptions,
    compute_domains: bool,
    pools: list[str] | None = None,
) -> dict[str, Any]:
    """The values the role sets for a component, with the pin's own ``values`` merged over them. ``pools``: the
    pools a fabric component serves (its DaemonSet runs on their nodes only)."""
    toleration = dict(GPU_TOLERATION)
    ours: dict[str, Any] = {}
    if name == "dranet":
        # DraNet's chart tolerates every NoSchedule taint (the GPU taint included); it runs on the pools whose class
        # has dra.net devices only.
        ours = {"affinity": _pool_affinity(pools or [])}
    elif name == "efa_device_plugin":
        # The chart tolerates nothing by default: the GPU pools' nvidia.com/gpu taint would keep it off their nodes.
        ours = {"tolerations": [toleration], "affinity": _pool_affinity(pools or [])}
    if name == "node_feature_discovery":
        # NFD's worker must run on the tainted GPU nodes, or they are never labelled (and the DRA kubelet plugin,
        # which selects NFD's labels, never schedules).
        ours = {"worker": {"tolerations": [toleration]}}
    elif name == "dra_driver":
        ours = {
            "nvidiaDriverRoot": options.root(),
            # GPU resources (and their DeviceClasses) are only deployed with this override in the 25.x charts.
            "gpuResourcesEnabledOverride": True,
            "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": compute_domains}},
            "kubeletPlugin": {"tolerations": [toleration]},
        }
    return deep_merge(ours, pin.values)


def _dra_ships(values: Mapping[str, Any], device_class: str) -> bool:
    """Whether the DRA driver chart, with these values, creates ``device_class``: the compute-domain classes only
    with ComputeDomains on, the others only with GPU resources on."""
    resources = values.get("resources") or {}
    part = "computeDomains" if device_class.startswith("compute-domain") else "gpus"
    return bool((resources.get(part) or {}).get("enabled", False))


def _device_class_drivers(cluster: StackCluster, classes: Mapping[str, InferenceClass]) -> dict[str, list[str]]:
    """DeviceClass name -> the DRA drivers of the devices naming it, over this cluster's pools."""
    out: dict[str, set[str]] = {}
    for pool in cluster.pools:
        klass = classes.get(pool.class_name)
        if klass is None:
            raise GpufleetError(f"cluster {cluster.name}: pool {pool.name!r} has unknown class {pool.class_name!r}")
        for device in klass.devices:
            if device.claim == "DRA" and device.device_class_name:
                out.setdefault(device.device_class_name, set()).add(device.driver)
    return {name: sorted(drivers) for name, drivers in sorted(out.items())}


def _fabric_pools(cluster: StackCluster, classes: Mapping[str, InferenceClass]) -> dict[str, list[str]]:
    """Fabric component -> the pools whose class has a device of its driver (DraNet: a ``claim: DRA`` device; the
    EFA device plugin: any device, on EKS only)."""
    out: dict[str, list[str]] = {}
    for pool in cluster.pools:
        for device in classes[pool.class_name].devices:
            component = FABRIC_COMPONENTS.get(device.driver)
            if component == "dranet" and device.claim != "DRA":
                continue
            if component == "efa_device_plugin" and cluster.provider != "eks":
                continue
            if component and pool.name not in out.setdefault(component, []):
                out[component].append(pool.name)
    return out


def _uninstalled_driver_warnings(
    cluster: StackCluster, classes: Mapping[str, InferenceClass], installs: Mapping[str, str]
) -> list[str]:
    """A ``claim: DRA`` device whose driver nothing installs on a GKE or EKS cluster (an existing cluster's preflight
    checks its drivers' ResourceSlices instead): its claims would never be allocated. One warning per class and
    driver, naming the class. ``installs``: driver -> the component of this plan that installs it."""
    if cluster.provider == "existing":
        return []
    found: dict[tuple[str, str], list[str]] = {}
    for pool in cluster.pools:
        for device in classes[pool.class_name].devices:
            if device.claim == "DRA" and device.driver not in installs:
                found.setdefault((pool.class_name, device.driver), []).append(pool.name)
    out = []
    for (klass, driver), pools in sorted(found.items()):
        component = FABRIC_COMPONENTS.get(driver)
        why = (
            f"its component {component} is disabled or not in serving_stack_versions"
            if component
            else "no component of the serving stack installs it"
        )
        out.append(
            f"class {klass} (pool {', '.join(sorted(set(pools)))}) has claim: DRA devices of driver {driver}, but "
            f"{why} and a {cluster.provider} cluster has no preflight that checks it: its ResourceSlices will not "
            "appear until you install the driver"
        )
    return out


def _gke_driver_pools(cluster: StackCluster, classes: Mapping[str, InferenceClass]) -> dict[str, list[str]]:
    """On GKE: node image (``cos`` / ``ubuntu`` / the image type) -> the GPU pools whose GPU driver installation is
    off (gpu_driver_version DISABLED, what provisioning sets for DRA), which need the driver installer."""
    out: dict[str, list[str]] = {}
    if cluster.provider != "gke":
        return out
    for pool in cluster.pools:
        prov = classes[pool.class_name].provisioning.gke
        if prov is None or prov.accelerator is None or prov.accelerator.gpu_driver_version not in GKE_DRIVER_OFF:
            continue
        image = prov.image_type.upper()
        family = "cos" if image.startswith("COS") else "ubuntu" if image.startswith("UBUNTU") else prov.image_type
        out.setdefault(family, []).append(pool.name)
    return out


def _gke_minor(version: str | None) -> str | None:
    match = re.match(r"^v?(\d+)\.(\d+)", version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _driver_installer(family: str, pin: GkeDriverPin, driver: GkeDriverVersion, pools: list[str]) -> dict[str, Any]:
    """The ``nvidia-driver-installer`` DaemonSet GKE documents for a node image (container-engine-accelerators'
    ``cos/daemonset-preloaded-latest.yaml`` / ``ubuntu/daemonset-preloaded-R*.yaml``, at ``pin.source``), with the
    driver version pinned and the nodes chosen by fleet pool instead of by ``cloud.google.com/gke-accelerator``: it
    installs the driver under /home/kubernetes/bin/nvidia, where the DRA driver's ``nvidiaDriverRoot`` points."""
    name = f"nvidia-driver-installer-{family}"
    selector = {"k8s-app": name}
    affinity = _pool_affinity(pools)
    # Never where GKE installed a driver itself (it labels those nodes with the version it installed).
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms[0]["matchExpressions"].append({"key": GKE_DRIVER_VERSION_LABEL, "operator": "DoesNotExist"})
    resources = {"requests": {"cpu": "150m"}}
    privileged = {"privileged": True}
    pause = {"image": pin.pause_image, "name": "pause"}
    spec: dict[str, Any]
    if family == "cos":
        flag = "" if driver.cos == "default" else f" --version={driver.cos}"
        install = (
            'if lsmod | grep -q nvidia; then echo "GPU driver already loaded: not installing"; exit 0; fi\n'
            f"/cos-gpu-installer install{flag} || exit 1\n"
            "chmod 755 /root/home/kubernetes/bin/nvidia\n"
        )
        host = [
            ("dev", "/dev"),
            ("vulkan-icd-mount", "/home/kubernetes/bin/nvidia/vulkan/icd.d"),
            ("nvidia-install-dir-host", "/home/kubernetes/bin/nvidia"),
            ("root-mount", "/"),
            ("cos-tools", "/var/lib/cos-tools"),
            ("nvidia-config", "/etc/nvidia"),
        ]
        env = {
            "NVIDIA_INSTALL_DIR_HOST": "/home/kubernetes/bin/nvidia",
            "NVIDIA_INSTALL_DIR_CONTAINER": "/usr/local/nvidia",
            "VULKAN_ICD_DIR_HOST": "/home/kubernetes/bin/nvidia/vulkan/icd.d",
            "VULKAN_ICD_DIR_CONTAINER": "/etc/vulkan/icd.d",
            "ROOT_MOUNT_DIR": "/root",
            "COS_TOOLS_DIR_HOST": "/var/lib/cos-tools",
            "COS_TOOLS_DIR_CONTAINER": "/build/cos-tools",
        }
        mounts = [
            ("nvidia-install-dir-host", "/usr/local/nvidia"),
            ("vulkan-icd-mount", "/etc/vulkan/icd.d"),
            ("dev", "/dev"),
            ("root-mount", "/root"),
            ("cos-tools", "/build/cos-tools"),
        ]
        init = [
            {
                "name": "nvidia-driver-installer",
                "image": pin.cos_image,
                "imagePullPolicy": "Never",  # preloaded on GKE's COS GPU nodes
                "command": ["bash", "-c", install],
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "resources": resources,
                "securityContext": privileged,
                "volumeMounts": [{"name": n, "mountPath": m} for n, m in mounts],
            },
            {
                # Applies the MIG partitioning GKE's gpu-partition-size asks for (nothing without it).
                "name": "partition-gpus",
                "image": pin.partition_image,
                "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
                "resources": resources,
                "securityContext": privileged,
                "volumeMounts": [
                    {"name": "nvidia-install-dir-host", "mountPath": "/usr/local/nvidia"},
                    {"name": "dev", "mountPath": "/dev"},
                    {"name": "nvidia-config", "mountPath": "/etc/nvidia"},
                ],
            },
        ]
        spec = {"hostNetwork": True, "hostPID": True}
    else:
        host = [("dev", "/dev"), ("boot", "/boot"), ("root-mount", "/")]
        init = [
            {
                "name": "nvidia-driver-installer",
                "image": pin.ubuntu_image,
                "env": [{"name": "NVIDIA_DRIVER_VERSION", "value": driver.ubuntu}],
                "resources": resources,
                "securityContext": privileged,
                "volumeMounts": [
                    {"name": "boot", "mountPath": "/boot"},
                    {"name": "dev", "mountPath": "/dev"},
                    {"name": "root-mount", "mountPath": "/root"},
                ],
            }
        ]
        spec = {}
    spec.update(
        {
            "priorityClassName": "system-node-critical",
            "affinity": affinity,
            "tolerations": [{"operator": "Exists"}],
            "volumes": [{"name": n, "hostPath": {"path": path}} for n, path in host],
            "initContainers": init,
            "containers": [pause],
        }
    )
    meta = _meta(name, GKE_DRIVER, pin.namespace)
    meta["labels"].update(selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": {"name": name, **selector}}, "spec": spec},
        },
    }


def _wants_compute_domains(cluster: StackCluster, classes: Mapping[str, InferenceClass]) -> bool:
    return any(
        d.driver == COMPUTE_DOMAIN_DRIVER
        for pool in cluster.pools
        if pool.class_name in classes
        for d in classes[pool.class_name].devices
    )


def _pool_expectations(cluster: StackCluster, classes: Mapping[str, InferenceClass]) -> list[dict[str, Any]]:
    """Per pool: its node count and, per DRA driver of its class, the devices a node must publish."""
    pools = []
    for pool in cluster.pools:
        drivers: dict[str, int] = {}
        for d in classes[pool.class_name].devices:
            if d.claim == "DRA":
                drivers[d.driver] = drivers.get(d.driver, 0) + d.count
        pools.append({"name": pool.name, "class": pool.class_name, "nodes": pool.nodes, "drivers": drivers})
    return pools


def _preset(name: str, image: str) -> dict[str, Any]:
    """A KServe LLMInferenceServiceConfig preset: vLLM serving the model KServe mounts at /mnt/models."""
    probe = {"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 5}
    security = {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    volumes = [
        {"name": "home", "emptyDir": {}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
    ]
    mounts = [{"name": "home", "mountPath": "/home"}, {"name": "dshm", "mountPath": "/dev/shm"}]
    env = [{"name": "HOME", "value": "/home"}, {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"}]
    serve = ["vllm", "serve", "/mnt/models"]
    common = ["--served-model-name", "{{ .Spec.Model.Name }}", "--port", "8000"]

    def container(args: list[str], *, probes: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": "main",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": serve,
            "args": args,
            "env": env,
            "ports": [{"containerPort": 8000, "protocol": "TCP"}],
            "securityContext": security,
            "volumeMounts": mounts,
        }
        if probes:
            out["readinessProbe"] = {**probe, "initialDelaySeconds": 10, "failureThreshold": 60}
            out["livenessProbe"] = {**probe, "initialDelaySeconds": 120, "failureThreshold": 3}
        return out

    spec: dict[str, Any]
    if name == "kserve-config-llm-template":
        spec = {"template": {"containers": [container(common)], "volumes": volumes}}
    elif name == "kserve-config-llm-worker-pipeline-parallel":
        leader = [*common, "--pipeline-parallel-size", "{{ .Spec.Parallelism.Pipeline }}",
                  "--distributed-executor-backend", "mp"]  # fmt: skip
        worker = ["--headless", "--pipeline-parallel-size", "{{ .Spec.Parallelism.Pipeline }}",
                  "--distributed-executor-backend", "mp"]  # fmt: skip
        spec = {
            "template": {"containers": [container(leader)], "volumes": volumes},
            "worker": {"containers": [container(worker, probes=False)], "volumes": volumes},
        }
    elif name == "kserve-config-llm-worker-data-parallel":
        leader = [*common, "--data-parallel-size", "{{ .Spec.Parallelism.Data }}",
                  "--data-parallel-size-local", "{{ .Spec.Parallelism.DataLocal }}"]  # fmt: skip
        worker = ["--headless", "--data-parallel-size", "{{ .Spec.Parallelism.Data }}",
                  "--data-parallel-size-local", "{{ .Spec.Parallelism.DataLocal }}"]  # fmt: skip
        spec = {
            "template": {"containers": [container(leader)], "volumes": volumes},
            "worker": {"containers": [container(worker, probes=False)], "volumes": volumes},
        }
    else:  # pragma: no cover - PRESETS is closed
        raise GpufleetError(f"unknown preset {name!r}")
    return {"apiVersion": KSERVE_API_VERSION, "kind": "LLMInferenceServiceConfig", "spec": spec}


def plan_cluster(
    cluster: Any,
    classes: Any,
    versions: Any,
    options: Any,
    overrides: Any = None,
) -> dict[str, Any]:
    """The serving stack of one cluster (a dict boundary: ``cluster`` is one of fleet_info's ``clusters``, ``classes``
    its ``classes``). Returns ``{cluster, provider, compute_domains, releases, objects, device_classes, pools,
    notes}``; ``releases`` and ``objects`` are in install order."""
    require_pydantic()
    c: StackCluster = parse(StackCluster, cluster, "cluster")
    if not isinstance(classes, Mapping):
        raise GpufleetError(f"classes: must be a mapping of inference classes (got {type(classes).__name__})")
    klasses: dict[str, InferenceClass] = {
        name: parse(InferenceClass, data, f"gpufleet_inference_classes[{name!r}]") for name, data in classes.items()
    }
    if not isinstance(options, Mapping):
        raise GpufleetError(f"options: must be a mapping (got {type(options).__name__})")
    opts: StackOptions = parse(StackOptions, {**options, "provider": c.provider}, "serving_stack")
    matrix = parse_versions(versions, overrides)

    device_classes = _device_class_drivers(c, klasses)  # also: every pool's class is known
    wanted_cd = _wants_compute_domains(c, klasses)
    compute_domains = {"auto": wanted_cd, "enabled": True, "disabled": False}[opts.compute_domains]
    fabric = _fabric_pools(c, klasses)
    notes: list[str] = []
    warnings: list[str] = []
    if opts.compute_domains == "auto":
        notes.append(
            f"ComputeDomains {'on' if compute_domains else 'off'}: "
            + (
                f"a pool's class has a {COMPUTE_DOMAIN_DRIVER} device (multi-node NVLink)"
                if compute_domains
                else "no pool asks for multi-node NVLink"
            )
        )

    releases: list[dict[str, Any]] = []
    namespaces: list[str] = []
    shipped_classes: dict[str, str] = {}
    shipped_presets: dict[str, str] = {}
    for name, pin in matrix.pins():
        if name in OPTIONAL_COMPONENTS and name not in fabric:
            continue  # chosen from the classes: no pool of this cluster asks for it
        enabled = pin.enabled if name != "envoy_gateway" else (pin.enabled and opts.gateway.enabled)
        if not enabled:
            notes.append(f"{COMPONENT_TITLES[name]}: disabled")
            continue
        values = _component_values(name, pin, opts, compute_domains, fabric.get(name))
        if name in fabric:
            notes.append(f"{COMPONENT_TITLES[name]}: for pool(s) {', '.join(fabric[name])}")
        releases.append(
            {
                "component": name,
                "title": COMPONENT_TITLES[name],
                "release": pin.release,
                "namespace": pin.namespace,
                "chart": pin.chart,
                "repository": pin.repository,
                "version": pin.version,
                "values": values,
                "wait_timeout": pin.wait_timeout,
                "detect_crd": pin.detect_crd,
                "ships_device_classes": [],
                **pin.chart_ref(),
            }
        )
        if pin.namespace not in namespaces:
            namespaces.append(pin.namespace)
        for dc in pin.ships_device_classes:
            if name == "dra_driver" and not _dra_ships(values, dc):
                continue
            shipped_classes[dc] = pin.release
            releases[-1]["ships_device_classes"].append(dc)
        for preset in pin.ships_presets:
            shipped_presets[preset] = pin.release

    objects: list[dict[str, Any]] = []
    if opts.gateway.enabled and opts.gateway.namespace not in namespaces:
        namespaces.append(opts.gateway.namespace)
    for ns in namespaces:
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns, "namespace")})

    dra = matrix.dra_driver
    if dra.enabled and c.provider in opts.critical_pods_quota.providers:
        quota = opts.critical_pods_quota
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": _meta(f"{dra.release}-critical-pods", "dra_driver", dra.namespace),
                "spec": {
                    "hard": {"pods": str(quota.pods)},
                    "scopeSelector": {
                        "matchExpressions": [
                            {"scopeName": "PriorityClass", "operator": "In", "values": list(quota.priority_classes)}
                        ]
                    },
                },
            }
        )

    for dc, drivers in device_classes.items():
        if dc in shipped_classes:
            notes.append(f"DeviceClass {dc}: shipped by the {shipped_classes[dc]} chart")
        elif not opts.device_classes:
            notes.append(f"DeviceClass {dc}: not created (serving_stack_device_classes is false)")
        else:
            objects.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": _meta(dc, "device_classes"),
                    "spec": {"selectors": [{"cel": {"expression": _cel_driver(drivers)}}]},
                }
            )

    kserve = matrix.kserve
    if kserve.enabled and matrix.kserve_crd.enabled:
        for preset in PRESETS:
            if preset in shipped_presets:
                notes.append(f"LLMInferenceServiceConfig {preset}: shipped by the {shipped_presets[preset]} chart")
            elif not opts.kserve_presets:
                notes.append(f"LLMInferenceServiceConfig {preset}: not created (serving_stack_kserve_presets is false)")
            else:
                obj = _preset(preset, opts.preset_image)
                obj["metadata"] = _meta(preset, "kserve", kserve.namespace)
                objects.append({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": obj["metadata"],
                                "spec": obj["spec"]})  # fmt: skip

    gw = opts.gateway
    if gw.enabled:
        objects.append(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass",
                "metadata": _meta(gw.class_name, "gateway"),
                "spec": {"controllerName": gw.controller_name},
            }
        )
        objects.append(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": _meta(gw.name, "gateway", gw.namespace),
                "spec": {
                    "gatewayClassName": gw.class_name,
                    "listeners": [
                        {
                            "name": "http",
                            "protocol": "HTTP",
                            "port": gw.port,
                            "allowedRoutes": {"namespaces": {"from": "All"}},
                        }
                    ],
                },
            }
        )

    # DRA drivers this plan installs; a claim: DRA device of another driver is warned about (on GKE / EKS).
    planned = {r["component"] for r in releases}
    installs = {d: "dra_driver" for d in (GPU_DRIVER, COMPUTE_DOMAIN_DRIVER) if "dra_driver" in planned}
    installs.update({d: comp for d, comp in FABRIC_COMPONENTS.items() if comp in planned})
    warnings.extend(_uninstalled_driver_warnings(c, klasses, installs))

    driver_objects, installers = _plan_gke_driver(c, klasses, matrix.gke_gpu_driver, notes, warnings)
    if driver_objects and driver_objects[0]["metadata"]["namespace"] not in (*namespaces, "kube-system"):
        ns = driver_objects[0]["metadata"]["namespace"]
        objects.insert(0, {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns, "namespace")})

    plan = {
        "cluster": c.name,
        "provider": c.provider,
        "compute_domains": compute_domains,
        "driver_root": opts.root() if dra.enabled else None,
        "releases": releases,
        "objects": objects,
        # Applied before the releases: the DRA driver's kubelet plugin needs the NVIDIA driver on the node.
        "driver_objects": driver_objects,
        "driver_installers": installers,
        "device_classes": sorted(device_classes),
        "pools": _pool_expectations(c, klasses),
        "notes": notes,
        "warnings": warnings,
        "order": list(COMPONENTS),
        "gitops": opts.gitops.tool,
    }
    plan["render_objects"], plan["release_lines"] = render_objects(plan, opts.gitops, warnings)
    return plan


def _plan_gke_driver(
    cluster: StackCluster,
    classes: Mapping[str, InferenceClass],
    pin: GkeDriverPin | None,
    notes: list[str],
    warnings: list[str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The NVIDIA driver installer DaemonSets of a GKE cluster whose GPU pools have GKE's driver installation off:
    ``(objects, installers)``; ``installers`` (name, namespace, image, pools, driver) is what the check waits for."""
    wanted = _gke_driver_pools(cluster, classes)
    if not wanted:
        return [], []
    every = ", ".join(p for pools in wanted.values() for p in pools)
    if pin is None or not pin.enabled:
        why = "disabled (serving_stack_versions.gke_gpu_driver.enabled)" if pin else "not in serving_stack_versions"
        warnings.append(
            f"GKE GPU driver installer {why}: pool(s) {every} have GKE's GPU driver installation off and nothing "
            "installs the NVIDIA driver there; the DRA driver finds no GPUs until you install it"
        )
        return [], []
    minor = _gke_minor(cluster.kubernetes_version)
    if minor is None:
        raise GpufleetError(
            f"cluster {cluster.name}: its GKE kubernetes_version is not known, so the NVIDIA driver pinned for it "
            "cannot be chosen (fleet_info's clusters carry it)"
        )
    driver = pin.versions.get(minor)
    if driver is None:
        raise GpufleetError(
            f"serving_stack_versions.gke_gpu_driver.versions: has no entry for GKE {minor} (cluster {cluster.name}; "
            f"pinned: {', '.join(sorted(pin.versions))}): pin the NVIDIA driver of that GKE version"
        )
    objects, installers = [], []
    for family, pools in sorted(wanted.items()):
        if family not in ("cos", "ubuntu"):
            warnings.append(
                f"pool(s) {', '.join(pools)} run node image {family}: GKE documents an NVIDIA driver installer for COS "
                "and Ubuntu only; install the driver there yourself"
            )
            continue
        obj = _driver_installer(family, pin, driver, pools)
        objects.append(obj)
        version = driver.cos if family == "cos" else driver.ubuntu
        installers.append(
            {
                "name": obj["metadata"]["name"],
                "namespace": pin.namespace,
                "image": family,
                "pools": list(pools),
                "driver": version,
            }
        )
        notes.append(
            f"GKE GPU driver: {pin.namespace}/{obj['metadata']['name']} installs NVIDIA driver {version} "
            f"(GKE {minor}, {family.upper() if family == 'cos' else 'Ubuntu'}) on pool(s) {', '.join(pools)}"
        )
    return objects, installers
