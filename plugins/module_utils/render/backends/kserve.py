# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Backend ``kserve``: every engine as a KServe ``serving.kserve.io/v1alpha2`` LLMInferenceService (KServe >= 0.20).

KServe v0.20 (pkg/controller/v1alpha2/llmisvc/config_merge.go): the controller itself applies
kserve-config-llm-template to single-node services and kserve-config-llm-worker-{pipeline,data}-parallel to
multi-node ones (chosen by spec.parallelism), then the explicit baseRefs on top; presets name the engine container
"main" and serve the model KServe mounts at /mnt/models. KServe mounts the cache PVC itself (``spec.model.uri``
``pvc://<claim>``), adds its own ports and readiness probe, and runs vLLM's own multi-node launcher (no Ray). The renderer
adds startup and liveness probes (``health``: a preset's own give a model 10 minutes to load) and a ``/dev/shm`` size.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import (
    LABEL_DEPLOYMENT,
    LABEL_ENDPOINT,
    LABEL_ROLE,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import Engine, ModelCache, ModelDeployment
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.base import (
    MEMBER_ROLES,
    PD_ROLES,
    Backend,
    Kind,
    PodInput,
    ReplicaInput,
    WorkloadInput,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.leaderworkerset import (
    LWS_WORKER_INDEX_LABEL,
    worker_nodes,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.containers import (
    container_tokens,
    drop_model_args,
    engine_container,
    flag_value,
    model_arg,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.pd import router_config

KSERVE_PRESET_SINGLE_NODE = "kserve-config-llm-template"
KSERVE_PRESET_PIPELINE_PARALLEL = "kserve-config-llm-worker-pipeline-parallel"
KSERVE_PRESET_DATA_PARALLEL = "kserve-config-llm-worker-data-parallel"
KSERVE_CONTAINER = "main"
# KServe derives <name>-kserve-mn (a LeaderWorkerSet) and other children from an LLMInferenceService's name.
MAX_KSERVE_NAME = 37


def kserve_model(dep: ModelDeployment, cache: ModelCache | None, engine: Engine) -> dict[str, Any]:
    """``spec.model``: the cache PVC when there is one, else the hub model the engine names."""
    serving = next(m for m in engine.members if m.role in ("Standalone", "Leader"))
    container = (serving.template or {})["spec"]["containers"][0]
    tokens = container_tokens(container)
    named = model_arg(container, tokens)
    served = flag_value(tokens, "--served-model-name")
    if cache is not None and cache.image_volume:
        raise GpufleetError(
            f"deployment {dep.name!r}: backend kserve mounts the cache from a PVC itself; cache {cache.name!r} is an "
            "OCI model image (source.oci), mounted as an image volume only by the deployment and leaderworkerset "
            "backends"
        )
    if cache is not None:
        uri = f"pvc://{cache.claim_name}"
        model_id = cache.source.hugging_face.repo if cache.source.hugging_face else None
    elif named is not None:
        if named.startswith("/"):
            raise GpufleetError(
                f"deployment {dep.name!r}: backend kserve cannot serve the local path {named!r}: set a cache "
                "(KServe mounts it at /mnt/models) or name a hub model (--model=<org>/<repo>)"
            )
        uri = named if "://" in named else f"hf://{named}"
        model_id = named
    else:
        raise GpufleetError(
            f"deployment {dep.name!r}: backend kserve needs to know where the model is: set the deployment's "
            "cache, or pass --model=<org>/<repo> to the engine container"
        )
    return {"uri": uri, "name": served or model_id or dep.name}


class KServeBackend(Backend):
    """Per engine, one LLMInferenceService; a prefill/decode instance (design.md §14) is one LLMInferenceService with
    ``spec.prefill`` (:meth:`objects`)."""

    name: ClassVar[str] = "kserve"
    roles: ClassVar[frozenset[str]] = MEMBER_ROLES | PD_ROLES
    # KServe v0.20.0's decode preset runs llm-d's routing sidecar itself (config-llm-decode-template.yaml) and its
    # scheduler is the router (spec.router.scheduler).
    pd_sidecar: ClassVar[bool] = False
    kinds: ClassVar[tuple[Kind, ...]] = (Kind("serving.kserve.io/v1alpha2", "LLMInferenceService", "Ready"),)
    max_name: ClassVar[int] = MAX_KSERVE_NAME
    mounts_cache: ClassVar[bool] = False
    runs_ray: ClassVar[bool] = False
    exposes_port: ClassVar[bool] = False
    # KServe's presets run vLLM or SGLang: /health. The startup and liveness probes the renderer adds merge over the
    # preset's (strategic merge by container name), which keeps its scheme and initial delay.
    health_path: ClassVar[str | None] = "/health"

    def validate(self, dep: ModelDeployment) -> None:
        if dep.ray:
            raise GpufleetError(
                f"deployment {dep.name!r}: ray: true is not supported with backend kserve (KServe's multi-node "
                "presets run vLLM's own multi-node launcher); use backend leaderworkerset or auto for a Ray gang"
            )
        if len({e.is_gang for e in dep.engines}) > 1:
            raise GpufleetError(
                f"deployment {dep.name!r}: backend kserve cannot mix Standalone and Leader/Worker engines in one "
                "deployment (the replica's Service could not select both kinds of serving pods); split the deployment"
            )

    def adapt_pod(self, pod: PodInput, container: dict[str, Any], spec: dict[str, Any]) -> None:
        if container.get("name") != KSERVE_CONTAINER:
            if any(c.get("name") == KSERVE_CONTAINER for c in spec["containers"][1:]):
                raise GpufleetError(
                    f"{pod.where}: the engine (first) container must be the one named {KSERVE_CONTAINER!r}"
                )
            container["name"] = KSERVE_CONTAINER  # KServe's presets and model mount address the container "main"
        if not container.get("command"):
            drop_model_args(container)
            serving = pod.member.role in ("Standalone", "Leader")
            if (
                serving
                and container.get("args")
                and flag_value(container_tokens(container), "--served-model-name") is None
            ):
                model_name = kserve_model(pod.dep, pod.cache, pod.engine)["name"]
                container["args"] = [f"--served-model-name={model_name}", *container["args"]]

    def service_selector(self, engine: Engine) -> dict[str, str]:
        # KServe gives leader and worker pods the same labels; LWS marks the leader with worker-index 0.
        return {LWS_WORKER_INDEX_LABEL: "0"} if engine.is_gang else {}

    def workload(self, w: WorkloadInput) -> dict[str, Any]:
        dep, engine, pods = w.dep, w.engine, w.pods
        serving_role = "Leader" if engine.is_gang else "Standalone"
        serving_spec = pods[serving_role][1]
        model = kserve_model(dep, w.cache, engine)
        pod_labels: dict[str, str] = {}
        pod_annotations: dict[str, str] = {}
        for role in ("Worker", serving_role):  # the serving pod's metadata wins
            if role in pods:
                meta = pods[role][0]
                pod_labels.update(meta.get("labels", {}))
                pod_annotations.update(meta.get("annotations", {}))
        pod_labels.pop(LABEL_ROLE, None)  # leader and worker share spec.labels: no per-role label
        pod_labels[LABEL_ENDPOINT] = "true"
        spec: dict[str, Any] = {}
        if dep.kserve.base_refs:
            refs = list(dep.kserve.base_refs)
        else:
            refs = [KSERVE_PRESET_PIPELINE_PARALLEL if engine.is_gang else KSERVE_PRESET_SINGLE_NODE]
        spec["baseRefs"] = [{"name": ref} for ref in refs]
        spec["model"] = model
        spec["replicas"] = w.placed.copies
        spec["labels"] = pod_labels
        if pod_annotations:
            spec["annotations"] = pod_annotations
        spec["template"] = serving_spec
        if engine.is_gang:
            size = 1 + worker_nodes(engine)
            spec["worker"] = pods["Worker"][1]
            if any(ref.endswith("worker-data-parallel") for ref in refs):
                parallelism: dict[str, Any] = {"data": size, "dataLocal": 1}
            else:
                parallelism = {"pipeline": size}
            tensor = flag_value(container_tokens(engine_container(serving_spec)), "--tensor-parallel-size", "-tp")
            if tensor is not None and tensor.isdigit() and int(tensor) >= 1:
                parallelism["tensor"] = int(tensor)
            spec["parallelism"] = parallelism
        return {
            "apiVersion": "serving.kserve.io/v1alpha2",
            "kind": "LLMInferenceService",
            "metadata": w.metadata,
            "spec": spec,
        }

    def objects(self, r: ReplicaInput) -> list[dict[str, Any]]:
        """Per engine as before; a prefill/decode instance as one LLMInferenceService: the decode engine is the
        service itself (``spec.template`` / ``worker`` / ``parallelism`` / ``replicas``), the prefill engine
        ``spec.prefill`` (``LLMInferenceServiceSpec.Prefill``: ``replicas``, ``labels``, ``annotations``,
        ``template``, ``worker``, ``parallelism``). KServe v0.20 then applies its decode and prefill presets
        (``config_merge.go``: ``config-llm-decode-template`` / ``config-llm-prefill-template``, which forward the
        container's args to vLLM and bring the routing sidecar), so no ``baseRefs`` are set unless
        ``kserve.base_refs`` names some; the scheduler gets the collection's router configuration inline
        (``spec.router.scheduler.config.inline``, an EndpointPickerConfig, ``render.pd.router_config``)."""
        if r.dep.ratio is None:
            return super().objects(r)
        by_role = {engine.role: (engine, placed) for engine, placed in r.engines}
        out: list[dict[str, Any]] = []
        services: dict[str, dict[str, Any]] = {}
        for role in ("prefill", "decode"):
            engine, placed = by_role[role]
            out.extend(r.renderer.claim_templates(engine, placed))
            pods = r.renderer.pods(engine, placed, self, claim_refs=True)
            pool = placed.members[0].pool
            metadata = r.renderer.metadata(r.renderer.object_name("pd", MAX_KSERVE_NAME), pool=pool)
            services[role] = self.workload(
                WorkloadInput(
                    dep=r.dep,
                    cache=r.cache,
                    replica=r.replica,
                    engine=engine,
                    placed=placed,
                    metadata=metadata,
                    pods=pods,
                )
            )
        service = services["decode"]
        spec = service["spec"]
        if not r.dep.kserve.base_refs:
            spec.pop("baseRefs", None)
        spec["replicas"] = r.dep.ratio.band("decode")[0]
        prefill = services["prefill"]["spec"]
        spec["prefill"] = {
            key: prefill[key]
            for key in ("replicas", "labels", "annotations", "template", "worker", "parallelism")
            if key in prefill
        }
        spec["prefill"]["replicas"] = r.dep.ratio.band("prefill")[0]
        # Requests enter at decode pods only (their sidecar has them prefilled): prefill pods serve no Service.
        spec["prefill"]["labels"] = {k: v for k, v in prefill["labels"].items() if k != LABEL_ENDPOINT}
        spec["router"] = {"scheduler": {"config": {"inline": router_config(r.dep, {LABEL_DEPLOYMENT: r.dep.name})}}}
        out.append(service)
        return out


BACKEND = KServeBackend()
