"""render/serving.py: what each backend renders, the pod rules of every serving pod, names, labels, input checks."""

from __future__ import annotations

import copy
import json
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import k8s_schemas
import pytest
from example_fleet import example_fleet
from render_case import (
    REPO,
    cache,
    container,
    deployment,
    engine_container,
    env,
    gang,
    kinds,
    model_endpoint,
    one,
    pod_templates,
    pods,
    render,
    replica,
    replica_objects,
    standalone,
)

from ansible_collections.gpufleet.serving.plugins.module_utils.contract import k8s_name
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.kserve import (
    KSERVE_PRESET_DATA_PARALLEL,
    KSERVE_PRESET_PIPELINE_PARALLEL,
    KSERVE_PRESET_SINGLE_NODE,
    MAX_KSERVE_NAME,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.backends.leaderworkerset import MAX_LWS_NAME
from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import (
    CACHE_PATH,
    render_serving_manifests,
)

# --------------------------------------------------------------------------------------------------------------------
# Which replicas, which objects, in which order
# --------------------------------------------------------------------------------------------------------------------


def test_only_the_given_clusters_replicas_are_rendered():
    dep = deployment()
    reps = [replica(dep, "c1", 0), replica(dep, "c2", 1), replica(dep, "c1", 2)]
    objs = render(dep, reps, cluster="c1")
    assert {o["metadata"]["labels"]["gpufleet.io/cluster"] for o in objs} == {"c1"}
    assert sorted({o["metadata"]["labels"]["gpufleet.io/replica-index"] for o in replica_objects(objs)}) == ["0", "2"]
    assert kinds(objs) == ["ResourceClaimTemplate", "Deployment", "Service"] * 2 + ["Service"]
    c2 = replica_objects(render(dep, reps, cluster="c2"))
    assert {o["metadata"]["labels"]["gpufleet.io/replica-index"] for o in c2} == {"1"}
    assert render(dep, reps, cluster="elsewhere") == []
    assert render(dep, [], cluster="c1") == []


def test_rendering_is_deterministic_and_leaves_its_input_alone():
    dep = deployment(members=gang(), gateway={"name": "gw"})
    reps = [replica(dep, "c1", i) for i in range(3)] + [replica(dep, "c2", 3)]
    frozen = copy.deepcopy((dep, reps))
    first = json.dumps(render(dep, reps))
    assert json.dumps(render(dep, list(reversed(reps)))) == first  # input order does not matter; key order neither
    assert (dep, reps) == frozen
    indexes = [o["metadata"]["labels"].get("gpufleet.io/replica-index") for o in json.loads(first)]
    assert indexes == [str(i) for i in range(3) for _kind in range(4)] + [None, None]  # the model Service, HTTPRoute


def test_backends_render_the_expected_workloads():
    assert kinds(render(deployment())) == ["ResourceClaimTemplate", "Deployment", "Service", "Service"]
    assert kinds(render(deployment(members=gang()))) == [
        "ResourceClaimTemplate",
        "ResourceClaimTemplate",
        "LeaderWorkerSet",
        "Service",
        "Service",
    ]
    assert kinds(render(deployment(members=gang(), backend="leaderworkerset")))[2] == "LeaderWorkerSet"
    assert kinds(render(deployment(backend="deployment")))[1] == "Deployment"
    assert kinds(render(deployment(backend="kserve")))[1] == "LLMInferenceService"


def test_auto_picks_per_engine_and_the_service_selects_every_engines_serving_pods():
    dep = deployment()
    dep["engines"].append({"name": "gang", "copies": 2, "members": gang(nodes=3)})
    objs = render(dep)
    assert kinds(objs) == [
        "ResourceClaimTemplate",
        "Deployment",
        "ResourceClaimTemplate",
        "ResourceClaimTemplate",
        "LeaderWorkerSet",
        "Service",
        "Service",
    ]
    lws = one(objs, "LeaderWorkerSet")
    assert lws["spec"]["replicas"] == 2
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 4
    templates = {(o["kind"], w): labels for o in objs for w, labels, _spec in pod_templates(o)}
    for service in (one(objs, "Service"), model_endpoint(objs)["Service"]):
        selector = service["spec"]["selector"].items()
        assert selector <= templates[("Deployment", "template")].items()
        assert selector <= templates[("LeaderWorkerSet", "leaderTemplate")].items()
        assert not selector <= templates[("LeaderWorkerSet", "workerTemplate")].items()


def test_copies_become_workload_replicas_and_deployment_selects_its_pods():
    dep = deployment()
    dep["engines"][0]["copies"] = 3
    objs = render(dep)
    workload = one(objs, "Deployment")
    assert workload["spec"]["replicas"] == 3
    assert (
        workload["spec"]["selector"]["matchLabels"].items()
        <= workload["spec"]["template"]["metadata"]["labels"].items()
    )
    assert workload["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}


# --------------------------------------------------------------------------------------------------------------------
# Claims
# --------------------------------------------------------------------------------------------------------------------


def test_claim_template_has_one_exact_request_per_device_request():
    dep = deployment(members=[standalone()])
    dep["engines"][0]["members"][0]["node_selector"]["devices"] = [
        {"name": "gpu", "count": 2, "selectors": [{"cel": "a"}, {"cel": "b"}]},
        {"name": "nic", "count": 1},
    ]
    rep = replica(dep)
    rep["engines"][0]["members"][0]["device_requests"][1]["device_class_name"] = "nic.example.com"
    objs = render(dep, [rep])
    rct = one(objs, "ResourceClaimTemplate")
    assert rct["spec"]["spec"]["devices"]["requests"] == [
        {
            "name": "gpu",
            "exactly": {
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 2,
                "selectors": [{"cel": {"expression": "a"}}, {"cel": {"expression": "b"}}],
            },
        },
        {"name": "nic", "exactly": {"deviceClassName": "nic.example.com", "allocationMode": "ExactCount", "count": 1}},
    ]
    spec = pods(one(objs, "Deployment"))["template"]
    assert spec["resourceClaims"] == [
        {"name": "gpufleet-devices", "resourceClaimTemplateName": rct["metadata"]["name"]}
    ]
    assert engine_container(spec)["resources"]["claims"] == [{"name": "gpufleet-devices"}]


@pytest.mark.parametrize("synthetic", [{"device_class_name": None}, {"device_class_name": "", "claim": "Synthetic"}])
def test_synthetic_requests_are_never_claimed(synthetic):
    dep = deployment(members=gang())
    rep = replica(dep)
    for member in dep["engines"][0]["members"]:
        member["node_selector"]["devices"].append({"name": "ib", "count": 8})
    for member in rep["engines"][0]["members"]:
        member["device_requests"].append({"name": "ib", "count": 8, "selectors": [], **synthetic})
    objs = render(dep, [rep])
    for rct in (o for o in objs if o["kind"] == "ResourceClaimTemplate"):
        assert [r["name"] for r in rct["spec"]["spec"]["devices"]["requests"]] == ["gpu"]
    # A member whose only matches are synthetic forms no claim at all.
    for member in rep["engines"][0]["members"]:
        member["device_requests"] = [r for r in member["device_requests"] if r["name"] == "ib"]
        member["nodes"] = 0
    objs = render(dep, [rep])
    assert "ResourceClaimTemplate" not in kinds(objs)
    for spec in pods(one(objs, "LeaderWorkerSet")).values():
        assert "resourceClaims" not in spec
        assert "claims" not in engine_container(spec).get("resources", {})


def _all_containers(objs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for obj in objs:
        for _where, _labels, spec in pod_templates(obj):
            yield from spec.get("containers", [])
            yield from spec.get("initContainers", [])


def test_no_nvidia_gpu_extended_resource_is_ever_requested():
    limits = {"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": "1", "cpu": "2"}}
    leader = container(args=["--model=org/big"], resources=copy.deepcopy(limits))
    worker = container(resources={"limits": {"nvidia.com/gpu": 8}})
    sidecar = {"name": "sidecar", "image": "busybox", "resources": copy.deepcopy(limits)}
    init = {"name": "init", "image": "busybox", "resources": copy.deepcopy(limits)}
    for dep in (
        deployment(members=[standalone(container(args=["--model=org/x"], resources=limits), initContainers=[init])]),
        deployment(members=gang(leader=leader, worker=worker)),
        deployment(members=gang(leader=leader, worker=worker), backend="kserve"),
    ):
        dep["engines"][0]["members"][0]["template"]["spec"]["containers"].append(copy.deepcopy(sidecar))
        objs = render(dep)
        containers = list(_all_containers(objs))
        assert len(containers) >= 3
        for c in containers:
            resources = c.get("resources", {})
            assert "nvidia.com/gpu" not in resources.get("limits", {}), c
            assert "nvidia.com/gpu" not in resources.get("requests", {}), c
        assert any(c.get("resources", {}).get("requests") == {"cpu": "2"} for c in containers)


# --------------------------------------------------------------------------------------------------------------------
# Pod rules
# --------------------------------------------------------------------------------------------------------------------


def test_pods_are_pinned_to_their_pool_and_tolerate_the_gpu_taint():
    user_toleration = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    dep = deployment(
        members=[standalone(container(args=["--model=x/y"]), nodeSelector={"disk": "ssd", "gpufleet.io/pool": "no"},
                            tolerations=[user_toleration, gpu])],
        tolerations=[{"key": "gpufleet.io/drain", "operator": "Exists", "effect": "NoExecute"}],
    )  # fmt: skip
    spec = pods(one(render(dep, [replica(dep, pool="h100")]), "Deployment"))["template"]
    assert spec["nodeSelector"] == {"disk": "ssd", "gpufleet.io/pool": "h100"}
    assert spec["tolerations"] == [
        user_toleration,
        gpu,
        {"key": "gpufleet.io/drain", "operator": "Exists", "effect": "NoExecute"},
    ]
    for where, spec in pods(one(render(deployment(members=gang())), "LeaderWorkerSet")).items():
        assert spec["tolerations"] == [gpu], where
        assert spec["nodeSelector"] == {"gpufleet.io/pool": "l4"}, where


def test_shm_is_memory_backed_and_not_duplicated():
    spec = pods(one(render(deployment()), "Deployment"))["template"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}} in spec["volumes"]
    spec = pods(one(render(deployment(shm_size="64Gi")), "Deployment"))["template"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}} in spec["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in engine_container(spec)["volumeMounts"]
    own = container(
        args=["--model=x/y"], volumeMounts=[{"name": "shm", "mountPath": "/dev/shm"}]
    )  # the user's own /dev/shm wins
    spec = pods(
        one(render(deployment(members=[standalone(own, volumes=[{"name": "shm", "emptyDir": {}}])])), "Deployment")
    )
    spec = spec["template"]
    assert [v["name"] for v in spec["volumes"]] == ["shm"]
    assert [m["mountPath"] for m in engine_container(spec)["volumeMounts"]] == ["/dev/shm"]


def test_readiness_probe_and_port():
    spec = pods(one(render(deployment(port=9000)), "Deployment"))["template"]
    c = engine_container(spec)
    assert c["readinessProbe"] == {
        "httpGet": {"path": "/health", "port": 9000},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }
    assert c["ports"] == [{"name": "http", "containerPort": 9000, "protocol": "TCP"}]
    own = {"exec": {"command": ["true"]}}
    c = engine_container(
        pods(
            one(
                render(deployment(members=[standalone(container(args=["--model=a/b"], readinessProbe=own))])),
                "Deployment",
            )
        )["template"]
    )
    assert c["readinessProbe"] == own
    tgi = {
        "name": "engine",
        "image": "ghcr.io/huggingface/text-generation-inference:3",
        "ports": [{"name": "http", "containerPort": 80}],
    }
    c = engine_container(pods(one(render(deployment(members=[standalone(tgi)])), "Deployment"))["template"])
    assert c["readinessProbe"]["tcpSocket"] == {"port": 8000}
    assert c["ports"] == [{"name": "http", "containerPort": 80}, {"containerPort": 8000, "protocol": "TCP"}]
    lws = pods(one(render(deployment(members=gang())), "LeaderWorkerSet"))
    assert "readinessProbe" in engine_container(lws["leaderTemplate"])
    assert "readinessProbe" not in engine_container(lws["workerTemplate"])
    assert "ports" not in engine_container(lws["workerTemplate"])


def test_gang_pods_get_leader_address_and_rank_from_lws():
    for where, spec in pods(one(render(deployment(members=gang())), "LeaderWorkerSet")).items():
        values = env(engine_container(spec))
        assert values["GPUFLEET_LEADER_ADDRESS"] == "$(LWS_LEADER_ADDRESS)", where
        assert values["GPUFLEET_RANK"] == {
            "fieldRef": {"fieldPath": "metadata.labels['leaderworkerset.sigs.k8s.io/worker-index']"}
        }, where
    assert "env" not in engine_container(pods(one(render(deployment()), "Deployment"))["template"])


def test_user_template_fields_pass_through():
    c = container(
        args=["--model=a/b"],
        env=[{"name": "A", "value": "1"}],
        securityContext={"runAsNonRoot": True},
        volumeMounts=[{"name": "cfg", "mountPath": "/etc/cfg"}],
        resources={"claims": [{"name": "other"}], "limits": {"memory": "1Gi"}},
    )
    member = standalone(
        c,
        imagePullSecrets=[{"name": "pull"}],
        volumes=[{"name": "cfg", "configMap": {"name": "cfg"}}],
        resourceClaims=[{"name": "other", "resourceClaimTemplateName": "mine"}],
        serviceAccountName="sa",
        initContainers=[{"name": "init", "image": "busybox"}],
    )
    member["template"]["metadata"] = {"labels": {"team": "a"}, "annotations": {"note": "x"}}
    dep = deployment(members=[member])
    template = one(render(dep), "Deployment")["spec"]["template"]
    spec = template["spec"]
    out = engine_container(spec)
    assert env(out)["A"] == "1"
    assert out["securityContext"] == {"runAsNonRoot": True}
    assert out["resources"] == {
        "claims": [{"name": "other"}, {"name": "gpufleet-devices"}],
        "limits": {"memory": "1Gi"},
    }
    assert {"name": "cfg", "mountPath": "/etc/cfg"} in out["volumeMounts"]
    assert spec["imagePullSecrets"] == [{"name": "pull"}]
    assert spec["serviceAccountName"] == "sa"
    assert spec["initContainers"] == [{"name": "init", "image": "busybox"}]
    assert [c["name"] for c in spec["resourceClaims"]] == ["other", "gpufleet-devices"]
    assert template["metadata"]["labels"]["team"] == "a"
    assert template["metadata"]["annotations"] == {"note": "x"}


# --------------------------------------------------------------------------------------------------------------------
# Model cache
# --------------------------------------------------------------------------------------------------------------------


def _cached(c: dict[str, Any], **cache_kw: Any) -> dict[str, Any]:
    dep = deployment(members=[standalone(c)], cache="qwen")
    return engine_container(pods(one(render(dep, caches=[cache(**cache_kw)]), "Deployment"))["template"])


def test_cache_is_mounted_read_only_and_the_hub_is_offline():
    dep = deployment(members=[standalone(container())], cache="qwen")
    spec = pods(one(render(dep, caches=[cache(name="other"), cache()]), "Deployment"))["template"]
    assert {
        "name": "gpufleet-model-cache",
        "persistentVolumeClaim": {"claimName": "gpufleet-cache-qwen", "readOnly": True},
    } in spec["volumes"]
    c = engine_container(spec)
    assert {"name": "gpufleet-model-cache", "mountPath": CACHE_PATH, "readOnly": True} in c["volumeMounts"]
    assert env(c)["HF_HUB_OFFLINE"] == "1"
    adopted = cache(storage={"backend": "existing_pvc", "claim_name": "team-weights"})
    spec = pods(one(render(dep, caches=[adopted]), "Deployment"))["template"]
    assert spec["volumes"][-1]["persistentVolumeClaim"]["claimName"] == "team-weights"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, {"args": [f"--model={CACHE_PATH}", f"--served-model-name={REPO}"]}),
        ({"args": ["--served-model-name=chat"]}, {"args": ["--served-model-name=chat", f"--model={CACHE_PATH}"]}),
        ({"args": [f"--model={REPO}"]}, {"args": [f"--model={CACHE_PATH}", f"--served-model-name={REPO}"]}),
        (
            {"args": ["--model", REPO, "-tp", "2"]},
            {"args": ["--model", CACHE_PATH, "-tp", "2", f"--served-model-name={REPO}"]},
        ),
        ({"args": [REPO, "--port", "8000"]}, {"args": [CACHE_PATH, "--port", "8000", f"--served-model-name={REPO}"]}),
        (
            {"command": ["vllm", "serve", REPO]},
            {"command": ["vllm", "serve", CACHE_PATH], "args": [f"--served-model-name={REPO}"]},
        ),
        ({"command": ["vllm", "serve", CACHE_PATH]}, {"command": ["vllm", "serve", CACHE_PATH]}),
        (
            {"command": ["vllm", "serve"], "args": ["/data/weights"]},
            {"command": ["vllm", "serve"], "args": ["/data/weights"]},
        ),
        (
            {"command": ["/bin/sh", "-c", f"vllm serve {CACHE_PATH} --port 8000"]},
            {"command": ["/bin/sh", "-c", f"vllm serve {CACHE_PATH} --port 8000"]},
        ),
        ({"image": "ghcr.io/huggingface/text-generation-inference:3"}, {}),
    ],
)
def test_vllm_is_pointed_at_the_cache_unless_it_names_a_model(given, expected):
    c = _cached(container(**given))
    assert {k: c[k] for k in ("command", "args") if k in c} == expected
    assert env(c)["HF_HUB_OFFLINE"] == "1"
    assert any(m["mountPath"] == CACHE_PATH for m in c["volumeMounts"])


def test_cache_conflicts_are_reported():
    with pytest.raises(GpufleetError, match="loads model 'other/model' from the hub"):
        _cached(container(args=["--model=other/model"]))
    with pytest.raises(GpufleetError, match="runs a shell script"):
        _cached(container(command=["/bin/sh", "-c", "exec vllm serve --port 8000"]))
    with pytest.raises(GpufleetError, match=f"mounts {CACHE_PATH} itself"):
        _cached(container(volumeMounts=[{"name": "w", "mountPath": CACHE_PATH}]))
    # Setting HF_HUB_OFFLINE yourself is the opt-out: the model argument and the value are left alone.
    c = _cached(container(args=["--model=other/model"], env=[{"name": "HF_HUB_OFFLINE", "value": "0"}]))
    assert c["args"] == ["--model=other/model"]
    assert env(c)["HF_HUB_OFFLINE"] == "0"


def test_cache_errors():
    dep = deployment(cache="qwen")
    with pytest.raises(FleetValidationError, match=r"deployment.cache: unknown model cache 'qwen' \(known: other\)"):
        render(dep, caches=[cache(name="other")])
    with pytest.raises(FleetValidationError, match="known: none given"):
        render(dep)
    with pytest.raises(FleetValidationError, match="lives in namespace 'elsewhere'"):
        render(dep, caches=[cache(namespace="elsewhere")])
    with pytest.raises(FleetValidationError, match=r"caches\[0\]\.size"):
        render(dep, caches=[cache(size="lots")])
    with pytest.raises(GpufleetError, match="caches must be a list"):
        render(dep, caches={"qwen": cache()})


# --------------------------------------------------------------------------------------------------------------------
# Ray
# --------------------------------------------------------------------------------------------------------------------


def _stub_bin(tmp_path: Path) -> dict[str, str]:
    """`ray` and `python3` that record their arguments and succeed: enough to run the wrapper scripts for real."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for name in ("ray", "python3", "vllm", "my-engine"):
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\n')
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log), "LWS_GROUP_SIZE": "2"}


def _run_container(c: dict[str, Any], environ: dict[str, str]) -> list[str]:
    # The kubelet expands $(VAR) of the container's env in command/args; LWS injects LWS_LEADER_ADDRESS.
    argv = [re.sub(r"\$\(LWS_LEADER_ADDRESS\)", "leader-0.lws.ns", a) for a in [*c["command"], *c.get("args", [])]]
    subprocess.run(argv, env=environ, check=True, timeout=20)
    return Path(environ["LOG"]).read_text().splitlines()


def test_ray_bootstrap_keeps_the_engine_command_on_the_leader(tmp_path):
    dep = deployment(members=gang(nodes=2), ray=True)
    lws = pods(one(render(dep), "LeaderWorkerSet"))
    environ = _stub_bin(tmp_path)
    calls = _run_container(engine_container(lws["leaderTemplate"]), environ)
    assert calls[0] == "ray start --head --port=6379 --disable-usage-stats"
    assert calls[1].startswith("python3 -c import os, ray;")  # waits until the gang's Ray nodes joined
    assert calls[2] == "vllm serve --model=org/big -tp 8 --distributed-executor-backend=ray"
    Path(environ["LOG"]).unlink()
    calls = _run_container(engine_container(lws["workerTemplate"]), environ)
    assert calls == ["ray start --address=leader-0.lws.ns:6379 --block"]


def test_ray_wraps_an_explicit_command_on_leader_and_worker(tmp_path):
    leader = {"name": "engine", "image": "example/engine", "command": ["my-engine", "--serve"], "args": ["a b"]}
    worker = {"name": "engine", "image": "example/engine", "command": ["my-engine", "--join"]}
    dep = deployment(members=gang(leader=leader, worker=worker), ray=True)
    lws = pods(one(render(dep), "LeaderWorkerSet"))
    environ = _stub_bin(tmp_path)
    calls = _run_container(engine_container(lws["leaderTemplate"]), environ)
    assert calls[-1] == "my-engine --serve a b"
    Path(environ["LOG"]).unlink()
    assert _run_container(engine_container(lws["workerTemplate"]), environ) == [
        "ray start --address=leader-0.lws.ns:6379",
        "my-engine --join",
    ]


def test_ray_needs_a_command_when_the_image_is_not_vllm_and_is_ignored_without_a_gang():
    leader = {"name": "engine", "image": "example/engine", "args": ["--serve"]}
    with pytest.raises(GpufleetError, match="ray: true needs an explicit command"):
        render(deployment(members=gang(leader=leader), ray=True))
    c = engine_container(pods(one(render(deployment(ray=True)), "Deployment"))["template"])
    assert "command" not in c


# --------------------------------------------------------------------------------------------------------------------
# KServe
# --------------------------------------------------------------------------------------------------------------------


def test_kserve_single_node_uses_the_template_preset_and_the_cache_pvc():
    dep = deployment(members=[standalone(container(args=["--max-model-len=4096"]))], backend="kserve", cache="qwen")
    objs = render(dep, caches=[cache()])
    isvc = one(objs, "LLMInferenceService")
    spec = isvc["spec"]
    assert spec["baseRefs"] == [{"name": KSERVE_PRESET_SINGLE_NODE}]
    assert spec["model"] == {"uri": "pvc://gpufleet-cache-qwen", "name": REPO}
    assert "worker" not in spec and "parallelism" not in spec
    c = engine_container(spec["template"])
    assert c["name"] == "main"
    assert c["args"] == [f"--served-model-name={REPO}", "--max-model-len=4096"]
    assert env(c)["HF_HUB_OFFLINE"] == "1"
    # KServe mounts the PVC named in spec.model itself; a second mount at /mnt/models would clash.
    assert all(m["mountPath"] != CACHE_PATH for m in c["volumeMounts"])
    assert all("persistentVolumeClaim" not in v for v in spec["template"]["volumes"])
    assert (
        spec["template"]["resourceClaims"][0]["resourceClaimTemplateName"]
        == one(objs, "ResourceClaimTemplate")["metadata"]["name"]
    )
    assert spec["labels"]["gpufleet.io/endpoint"] == "true"
    assert one(objs, "Service")["spec"]["selector"].items() <= spec["labels"].items()
    assert model_endpoint(objs)["Service"]["spec"]["selector"].items() <= spec["labels"].items()


def test_kserve_gang_has_per_role_claims_and_pipeline_parallelism():
    objs = render(deployment(members=gang(nodes=3), backend="kserve"))
    isvc = one(objs, "LLMInferenceService")
    spec = isvc["spec"]
    assert spec["baseRefs"] == [{"name": KSERVE_PRESET_PIPELINE_PARALLEL}]
    assert spec["parallelism"] == {"pipeline": 4, "tensor": 8}
    assert spec["model"] == {"uri": "hf://org/big", "name": "org/big"}
    rcts = [o["metadata"]["name"] for o in objs if o["kind"] == "ResourceClaimTemplate"]
    assert [spec[r]["resourceClaims"][0]["resourceClaimTemplateName"] for r in ("template", "worker")] == rcts
    # The preset serves /mnt/models positionally: the engine's own --model is dropped, not doubled.
    assert engine_container(spec["template"])["args"] == ["--served-model-name=org/big", "-tp", "8"]
    assert one(objs, "Service")["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    assert model_endpoint(objs)["Service"]["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"


def test_kserve_base_refs_override_and_data_parallel():
    dep = deployment(
        members=gang(nodes=1), backend="kserve", kserve={"base_refs": [KSERVE_PRESET_DATA_PARALLEL, "team-extras"]}
    )
    spec = one(render(dep), "LLMInferenceService")["spec"]
    assert spec["baseRefs"] == [{"name": KSERVE_PRESET_DATA_PARALLEL}, {"name": "team-extras"}]
    assert spec["parallelism"] == {"data": 2, "dataLocal": 1, "tensor": 8}


@pytest.mark.parametrize(
    ("dep", "message"),
    [
        (deployment(members=gang(), backend="kserve", ray=True), "ray: true is not supported with backend kserve"),
        (deployment(members=[standalone(container())], backend="kserve"), "needs to know where the model is"),
        (
            deployment(members=[standalone(container(command=["vllm", "serve", "/data/m"]))], backend="kserve"),
            "cannot serve the local path '/data/m'",
        ),
        (
            deployment(
                members=[standalone(container(args=["--model=a/b"]))],
                backend="kserve",
                engines=None,
            ),
            "cannot mix Standalone and Leader/Worker",
        ),
    ],
)
def test_kserve_errors(dep, message):
    if dep.get("engines") is None:
        dep["engines"] = [
            {"name": "one", "members": [standalone(container(args=["--model=a/b"]))]},
            {"name": "two", "members": gang()},
        ]
    with pytest.raises(GpufleetError, match=re.escape(message)):
        render(dep)


def test_kserve_engine_container_must_be_first():
    member = standalone(container(args=["--model=a/b"]))
    member["template"]["spec"]["containers"].append({"name": "main", "image": "x"})
    with pytest.raises(GpufleetError, match="engine \\(first\\) container must be the one named 'main'"):
        render(deployment(members=[member], backend="kserve"))


# --------------------------------------------------------------------------------------------------------------------
# Labels, names, Service, HTTPRoute
# --------------------------------------------------------------------------------------------------------------------


LABEL_SHAPES = {
    "deployment": deployment,
    "lws": lambda: deployment(members=gang()),
    "kserve": lambda: deployment(members=gang(), backend="kserve", gateway={"name": "gw"}),
}


@pytest.mark.parametrize("shape", sorted(LABEL_SHAPES))
def test_everything_rendered_carries_the_placement_labels(shape):
    dep = LABEL_SHAPES[shape]()
    objs = render(dep, [replica(dep, "c1", 7, pool="h100")], cluster="c1")
    expected = {
        "gpufleet.io/deployment": "chat",
        "gpufleet.io/cluster": "c1",
        "gpufleet.io/replica-index": "7",
        "gpufleet.io/pool": "h100",
        "gpufleet.io/replica": "chat-c1-7",
        "app.kubernetes.io/managed-by": "gpufleet.serving",
        "gpufleet.io/component": "serving",
    }
    for obj in replica_objects(objs):
        assert expected.items() <= obj["metadata"]["labels"].items(), obj["kind"]
        if obj["kind"] == "ResourceClaimTemplate":
            assert expected.items() <= obj["spec"]["metadata"]["labels"].items()
        for where, labels, _spec in pod_templates(obj):
            assert expected.items() <= labels.items(), where
            assert labels["gpufleet.io/engine"] == "main"
    placement = json.loads(one(objs, "Service")["metadata"]["annotations"]["gpufleet.io/placement"])
    assert placement["index"] == 7 and placement["cluster"] == "c1"
    assert [m["pool"] for m in placement["engines"][0]["members"]] == ["h100"] * len(dep["engines"][0]["members"])
    # The model endpoint is owned by the deployment on the cluster (pruned with it), not by a replica.
    endpoint = model_endpoint(objs)
    assert sorted(endpoint) == (["HTTPRoute", "Service"] if "gateway" in dep else ["Service"])
    owner = {k: v for k, v in expected.items() if k not in ("gpufleet.io/replica", "gpufleet.io/replica-index")}
    owner.pop("gpufleet.io/pool")
    for obj in endpoint.values():
        assert obj["metadata"]["labels"] == owner, obj["kind"]
        assert "annotations" not in obj["metadata"]  # no placement: read-back counts replicas, not endpoints
    k8s_schemas.validate_objects(objs)


def test_managed_labels_cannot_be_overridden():
    member = standalone(container(args=["--model=a/b"]))
    member["template"]["metadata"] = {
        "labels": {
            "gpufleet.io/pool": "wrong",
            "app.kubernetes.io/managed-by": "me",
            "gpufleet.io/replica-index": "9",
            "team": "a",
        }
    }
    dep = deployment(members=[member])
    objs = render(dep, labels={"gpufleet.io/cluster": "fake", "cost-center": "42"}, annotations={"owner": "ml"})
    for obj in objs:
        labels = obj["metadata"]["labels"]
        assert labels["gpufleet.io/cluster"] == "c1"
        assert labels["cost-center"] == "42"
        assert obj["metadata"]["annotations"]["owner"] == "ml"
    labels = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert labels["gpufleet.io/pool"] == "l4"
    assert labels["app.kubernetes.io/managed-by"] == "gpufleet.serving"
    assert labels["gpufleet.io/component"] == "serving"
    assert labels["gpufleet.io/replica-index"] == "0"
    assert labels["team"] == "a" and labels["cost-center"] == "42"
    with pytest.raises(GpufleetError, match="not a valid label value"):
        render(dep, labels={"team": "has space"})
    member["template"]["metadata"]["labels"]["replicas"] = 3
    # Caught with the deployment's field path before anything is rendered (issue 23).
    with pytest.raises(
        GpufleetError,
        match=r"deployment\.engines\[0\]\.members\[0\]\.template\.metadata\.labels\.replicas: must be a label value: "
        r"a string.* \(got 3\)",
    ):
        render(dep)


def test_reserved_labels_are_dropped_where_they_are_not_set():
    members = gang()
    members[1]["template"]["metadata"] = {"labels": {"gpufleet.io/endpoint": "true", "gpufleet.io/role": "leader"}}
    objs = render(deployment(members=members), labels={"gpufleet.io/engine": "x"})
    worker = one(objs, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
    assert "gpufleet.io/endpoint" not in worker
    assert worker["gpufleet.io/role"] == "worker"
    assert "gpufleet.io/engine" not in one(objs, "Service")["metadata"]["labels"]
    assert not one(objs, "Service")["spec"]["selector"].items() <= worker.items()
    assert not model_endpoint(objs)["Service"]["spec"]["selector"].items() <= worker.items()


def test_names_are_bounded_dns_labels_and_stable():
    long = "a" * 57
    dep = deployment(members=gang(), name=long)
    dep["engines"][0]["name"] = "e" * 63
    reps = [replica(dep, "c1", 0, name=f"{long}-1a2b3"), replica(dep, "c1", 1, name=f"{long}-ffff0")]
    objs = render(dep, reps)
    assert objs == render(dep, reps)
    names = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert len(set(names)) == len(names)  # two long replicas never collide after truncation
    for kind, name in names:
        limit = MAX_LWS_NAME if kind == "LeaderWorkerSet" else 63
        assert len(name) <= limit and re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name), (kind, name)
    dep_k = deployment(members=gang(), backend="kserve", name="9" * 40)
    isvc = one(render(dep_k, [replica(dep_k, name="9" * 40 + "-abcde")]), "LLMInferenceService")
    assert len(isvc["metadata"]["name"]) <= MAX_KSERVE_NAME and isvc["metadata"]["name"].startswith("gf-")
    assert k8s_name("qwen-demo-3f9a1") == "qwen-demo-3f9a1"
    assert k8s_name("x" * 80) == k8s_name("x" * 80) != k8s_name("x" * 81)


def test_http_route_only_with_a_gateway_and_deployment_gateway_wins():
    dep = deployment()
    assert "HTTPRoute" not in kinds(render(dep))
    objs = render(dep, gateway={"name": "fleet-gw", "namespace": "gw", "section_name": "https"})
    route = model_endpoint(objs)["HTTPRoute"]
    assert [o["kind"] for o in objs].count("HTTPRoute") == 1  # one per model and cluster, none per replica
    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "fleet-gw",
            "namespace": "gw",
            "sectionName": "https",
        }
    ]
    rule = route["spec"]["rules"][0]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/ml/chat/"}}]
    assert rule["filters"] == [
        {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}
    ]
    assert rule["timeouts"] == {"request": "0s"}
    assert rule["backendRefs"] == [{"name": "chat", "port": 8000}]
    assert model_endpoint(objs)["Service"]["metadata"]["name"] == "chat"
    dep["gateway"] = {"name": "team-gw"}
    route = model_endpoint(render(dep, gateway={"name": "fleet-gw"}))["HTTPRoute"]
    assert route["spec"]["parentRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "team-gw"}]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"gateway": {"name": "gw", "namespace": "GW"}}, "gateway.namespace: must be a namespace name"),
        ({"gateway": {"name": "gw", "section_name": "HTTP"}}, "gateway.section_name: must be a Gateway listener name"),
        ({"annotations": {"bad key": "x"}}, "annotations: must be an annotation key"),
        ({"annotations": {"a": "x" * 262_144}}, "Kubernetes allows at most 262144"),
    ],
)
def test_render_options_kubernetes_rejects_are_errors(kw, message):
    """The filter's own options are checked as the deployment's fields are (issue 23)."""
    with pytest.raises(FleetValidationError, match=re.escape(message)):
        render(deployment(), **kw)


def test_empty_gateway_fields_and_toleration_effect_are_rendered_unset():
    dep = deployment(
        gateway={"name": "gw", "namespace": "", "section_name": ""},
        tolerations=[{"key": "gpufleet.io/drain", "operator": "Exists", "effect": ""}],
    )
    objs = render(dep)
    assert model_endpoint(objs)["HTTPRoute"]["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
    ]
    tolerations = one(objs, "Deployment")["spec"]["template"]["spec"]["tolerations"]
    assert {"key": "gpufleet.io/drain", "operator": "Exists"} in tolerations


# --------------------------------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------------------------------


def _bad(mutate) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    dep = deployment(members=gang())
    reps = [replica(dep)]
    mutate(dep, reps)
    return dep, reps


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d, r: r[0].update(deployment="other"),
            "replicas[0].deployment: 'other' does not match the deployment 'chat'",
        ),
        (lambda d, r: r[0].update(namespace="x"), "replicas[0].namespace: 'x' does not match"),
        (lambda d, r: r[0]["engines"][0].update(name="nope"), "replicas[0].engines[0].name: 'nope' is not an engine"),
        (lambda d, r: r[0].update(engines=[]), "replicas[0].engines: has no placement for engine(s) main"),
        (
            lambda d, r: r[0]["engines"][0]["members"][1].update(role="Standalone"),
            "members[1].role: 'Standalone' does not match engine 'main'",
        ),
        (lambda d, r: r[0]["engines"][0]["members"].pop(), "must place every member of engine 'main'"),
        (
            lambda d, r: r[0]["engines"][0]["members"][0].update(pool=None),
            "members[0].pool: must be the node pool's name",
        ),
        (
            lambda d, r: r[0]["engines"][0]["members"][0]["device_requests"][0].update(name="tpu"),
            "'tpu' is not a device request of the Leader member",
        ),
        (
            lambda d, r: r[0]["engines"][0]["members"][0]["device_requests"][0].update(count=0),
            "count: must be an integer >= 1",
        ),
        (lambda d, r: r[0].update(index="0"), "replicas[0].index: must be an integer >= 0"),
        (lambda d, r: r.append(copy.deepcopy(r[0])), "replicas[1].name: duplicate replica name"),
        (
            lambda d, r: r.append({**copy.deepcopy(r[0]), "name": "x"}),
            "duplicate replica identity (cluster 'c1', index 0)",
        ),
        (lambda d, r: r.append("replica"), "replicas[1]: must be a replica mapping (got str)"),
        (
            lambda d, r: d["engines"][0]["members"][1].pop("template"),
            "deployment.engines[0].members[1].template: is required",
        ),
        (
            lambda d, r: d.update(backend="magic"),
            "deployment.backend: must be one of auto, deployment, leaderworkerset, kserve",
        ),
    ],
)
def test_bad_input_is_named(mutate, message):
    dep, reps = _bad(mutate)
    with pytest.raises(GpufleetError) as err:
        render(dep, reps)
    assert message in str(err.value)


def test_bad_top_level_arguments():
    dep = deployment()
    with pytest.raises(GpufleetError, match="replicas must be a list of replicas \\(got dict\\)"):
        render_serving_manifests({"name": "x"}, dep, cluster="c1")
    with pytest.raises(GpufleetError, match="cluster must be the name"):
        render_serving_manifests([], dep, cluster="")
    with pytest.raises(GpufleetError, match="deployment must be a mapping"):
        render_serving_manifests([], ["x"], cluster="c1")
    with pytest.raises(GpufleetError, match="pod template has only metadata and spec"):
        member = standalone(container(args=["--model=a/b"]))
        member["template"]["kind"] = "Pod"
        render(deployment(members=[member]))


# --------------------------------------------------------------------------------------------------------------------
# Plain data (Ansible passes tagged str/dict/list subclasses and lazy containers)
# --------------------------------------------------------------------------------------------------------------------


class TaggedStr(str):
    def __str__(self) -> str:  # a subclass may even lie in __str__: to_plain must not trust it
        return "tagged!"


class Lazy:
    def __init__(self, value: Any) -> None:
        self.value = value


class LazyDict(dict):
    """Like Ansible's lazy containers: values are only resolved when read through the mapping protocol."""

    def items(self):
        return [(k, v.value if isinstance(v, Lazy) else v) for k, v in super().items()]

    def __getitem__(self, key):
        value = super().__getitem__(key)
        return value.value if isinstance(value, Lazy) else value


class TaggedList(list):
    pass


def tag(value: Any) -> Any:
    if isinstance(value, dict):
        return LazyDict({TaggedStr(k): Lazy(tag(v)) for k, v in value.items()})
    if isinstance(value, list):
        return TaggedList(tag(v) for v in value)
    if isinstance(value, str):
        return TaggedStr(value)
    return value


def test_to_plain_strips_subclasses_and_reads_through_the_protocol():
    value = LazyDict(a=Lazy(TaggedList([TaggedStr("x"), 1, True, 2.5, None])), b=Lazy("lazy"))
    assert dict(value)["b"] is not None and isinstance(dict(value)["b"], Lazy)  # the raw storage is not the value
    plain = to_plain(value)
    assert plain == {"a": ["x", 1, True, 2.5, None], "b": "lazy"}
    # Exact types on purpose: a TaggedList/TaggedStr (subclasses of list/str) must not survive to_plain().
    assert type(plain) is dict and type(plain["a"]) is list and type(plain["a"][0]) is str  # pylint: disable=unidiomatic-typecheck
    with pytest.raises(GpufleetError, match=r"value\.s: set is not plain data"):
        to_plain({"s": {1, 2}})
    with pytest.raises(GpufleetError, match="keys must be strings"):
        to_plain({1: "x"})


def test_tagged_input_renders_like_plain_input():
    dep = deployment(members=gang(leader=container(args=["-tp", "8"])), gateway={"name": "gw"}, cache="qwen")
    reps = [replica(dep), replica(dep, "c2", 1)]
    expected = render(dep, reps, caches=[cache()], labels={"team": "a"})
    tagged = render_serving_manifests(
        tag(reps), tag(dep), cluster=TaggedStr("c1"), caches=tag([cache()]), labels=tag({"team": "a"})
    )
    assert tagged == expected
    assert json.dumps(tagged) == json.dumps(expected)
    # Exact type on purpose: no tagged (dict subclass) object may reach the output.
    assert all(type(o) is dict for o in tagged)  # pylint: disable=unidiomatic-typecheck


# --------------------------------------------------------------------------------------------------------------------
# With the real placement
# --------------------------------------------------------------------------------------------------------------------


def test_renders_what_replica_placement_returns_for_the_example_fleet():
    placement = pytest.importorskip("ansible_collections.gpufleet.serving.plugins.module_utils.placement")
    from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet

    data = example_fleet()
    fleet = validate_fleet(
        classes=data["classes"], hosts=data["hosts"], deployments=data["deployments"], caches=data["caches"]
    )
    clusters = fleet.to_dict()["clusters"]
    rendered: dict[str, int] = {}
    for dep in data["deployments"]:
        result = placement.place(deployment=dep, clusters=clusters, classes=data["classes"])
        for cluster in sorted({r["cluster"] for r in result["replicas"]}):
            objs = render_serving_manifests(result["replicas"], dep, cluster=cluster, caches=data["caches"])
            assert {o["metadata"]["labels"]["gpufleet.io/cluster"] for o in objs} == {cluster}
            for rct in (o for o in objs if o["kind"] == "ResourceClaimTemplate"):
                assert [r["name"] for r in rct["spec"]["spec"]["devices"]["requests"]] == ["gpu"]  # never "ib"
            k8s_schemas.validate_objects(objs)
            rendered[dep["name"]] = rendered.get(dep["name"], 0) + len(objs)
    # qwen-demo: 3 clusters x (claim template, Deployment, Service, model Service); deepseek-v3: 2 claim templates,
    # LWS, Service, model Service.
    assert rendered["qwen-demo"] == 12
    assert rendered["deepseek-v3"] == 5
