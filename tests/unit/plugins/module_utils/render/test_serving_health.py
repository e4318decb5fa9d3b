"""Serving-side health (issue 27 item 4) and the wait for a model cache (issue 26 item 3): what every serving pod gets.

A loading engine is never killed before ``health.startup_timeout``, a hung one is restarted after
``health.liveness_timeout``, ``/dev/shm`` has a size limit, and a pod that mounts a hydrated cache starts its engine only
once the hydration Job's completion manifest is on the volume.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import k8s_schemas
import pytest
from render_case import cache, container, deployment, engine_container, gang, one, pods, render, standalone

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import (
    CACHE_MANIFEST,
    CACHE_WAIT_CONTAINER,
    CACHE_WAIT_SCRIPT,
)

SGLANG = "lmsysorg/sglang:v0.5.4"
TGI = "ghcr.io/huggingface/text-generation-inference:3"


def engine(dep: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return engine_container(pods(one(render(dep, **kw), "Deployment"))["template"])


def pod_spec(dep: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return pods(one(render(dep, **kw), "Deployment"))["template"]


# --------------------------------------------------------------------------------------------------------------------
# Probes
# --------------------------------------------------------------------------------------------------------------------


def test_a_vllm_engine_gets_startup_liveness_and_readiness_probes_on_its_health_endpoint():
    c = engine(deployment())
    get = {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 10, "timeoutSeconds": 5}
    # 30 minutes to load the model; restarted after a minute without answering; out of the Services after 30 s.
    assert c["startupProbe"] == {**get, "failureThreshold": 180}
    assert c["livenessProbe"] == {**get, "failureThreshold": 6}
    assert c["readinessProbe"] == {**get, "failureThreshold": 3}


def test_a_gang_leader_gets_an_hour_to_load_and_its_workers_no_probe():
    lws = pods(one(render(deployment(members=gang())), "LeaderWorkerSet"))
    leader = engine_container(lws["leaderTemplate"])
    assert leader["startupProbe"]["failureThreshold"] * leader["startupProbe"]["periodSeconds"] == 3600
    assert leader["livenessProbe"]["failureThreshold"] == 6
    worker = engine_container(lws["workerTemplate"])  # no HTTP server; a failed leader restarts the whole group
    assert not {"startupProbe", "livenessProbe", "readinessProbe"} & set(worker)


@pytest.mark.parametrize(
    ("given", "handler"),
    [
        ({"image": SGLANG}, {"httpGet": {"path": "/health", "port": 8000}}),
        (
            {"image": "example/engine", "command": ["python3", "-m", "sglang.launch_server", "--port", "8000"]},
            {"httpGet": {"path": "/health", "port": 8000}},
        ),
        ({"image": TGI}, {"tcpSocket": {"port": 8000}}),  # no known health endpoint: the port answers
    ],
)
def test_the_probe_handler_follows_the_engine(given, handler):
    c = engine(deployment(members=[standalone(container(**given))]))
    for key in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert {k: v for k, v in c[key].items() if k in ("httpGet", "tcpSocket")} == handler, key


def test_health_settings_are_applied_and_durations_read_as_people_write_them():
    dep = deployment(
        members=[standalone(container(image=TGI))],
        port=9000,
        health={
            "path": "/ready",
            "startup_timeout": "1h30m",
            "liveness_timeout": "2m",
            "period_seconds": 20,
            "timeout_seconds": 8,
        },
    )
    c = engine(dep)
    get = {"httpGet": {"path": "/ready", "port": 9000}, "periodSeconds": 20, "timeoutSeconds": 8}
    assert c["startupProbe"] == {**get, "failureThreshold": 270}  # 5400 s / 20 s
    assert c["livenessProbe"] == {**get, "failureThreshold": 6}  # 120 s / 20 s
    assert c["readinessProbe"] == {**get, "failureThreshold": 3}
    # A duration that is no multiple of the period is rounded up: the model never gets less than asked for.
    dep["health"] = {"startup_timeout": 95, "period_seconds": 10}
    assert engine(dep)["startupProbe"]["failureThreshold"] == 10


def test_a_probe_the_template_sets_is_kept_and_the_others_are_added():
    own = {"exec": {"command": ["/bin/check"]}, "periodSeconds": 30}
    c = engine(deployment(members=[standalone(container(args=["--model=a/b"], livenessProbe=own))]))
    assert c["livenessProbe"] == own
    assert c["startupProbe"]["httpGet"]["path"] == "/health"
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"


def test_kserve_gets_startup_and_liveness_probes_over_its_presets_readiness():
    isvc = one(render(deployment(members=gang(), backend="kserve")), "LLMInferenceService")
    main = engine_container(isvc["spec"]["template"])
    # Merged over the preset's probes by container name: the preset's 10-minute startup would kill a big model.
    assert main["startupProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    assert main["startupProbe"]["failureThreshold"] == 360
    assert main["livenessProbe"]["failureThreshold"] == 6
    assert "readinessProbe" not in main and "ports" not in main
    assert not {"startupProbe", "livenessProbe"} & set(engine_container(isvc["spec"]["worker"]))


@pytest.mark.parametrize(
    ("health", "message"),
    [
        ({"startup_timeout": "half an hour"}, "deployment.health.startup_timeout: must be a duration"),
        ({"startup_timeout": "2d"}, "deployment.health.startup_timeout: must be a duration"),
        ({"startup_timeout": 0}, "deployment.health.startup_timeout: must be >= 1"),
        ({"startup_timeout": "25h"}, "deployment.health.startup_timeout: must be <= 86400"),
        ({"liveness_timeout": "5s"}, "deployment.health: liveness_timeout (5s) must be at least period_seconds (10s)"),
        ({"period_seconds": "10"}, "deployment.health.period_seconds: must be an integer"),
        ({"path": "health"}, "deployment.health.path: must be an HTTP path"),
        ({"probe": "/x"}, "deployment.health.probe"),
    ],
)
def test_bad_health_settings_are_named_by_their_path(health, message):
    with pytest.raises(FleetValidationError) as err:
        render(deployment(health=health))
    assert message in str(err.value)


# --------------------------------------------------------------------------------------------------------------------
# /dev/shm
# --------------------------------------------------------------------------------------------------------------------


def test_shm_has_a_size_limit_and_a_unit_mistake_is_refused():
    volumes = {v["name"]: v for v in pod_spec(deployment())["volumes"]}
    assert volumes["dshm"] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    volumes = {v["name"]: v for v in pod_spec(deployment(shm_size="2Gi"))["volumes"]}
    assert volumes["dshm"]["emptyDir"]["sizeLimit"] == "2Gi"
    with pytest.raises(FleetValidationError, match=r"deployment\.shm_size: must be at least 64Mi, .*got '16'"):
        render(deployment(shm_size=16))
    with pytest.raises(FleetValidationError, match=r"deployment\.shm_size: 'lots' is not a Kubernetes quantity"):
        render(deployment(shm_size="lots"))


# --------------------------------------------------------------------------------------------------------------------
# Waiting for the model cache
# --------------------------------------------------------------------------------------------------------------------


def cached(**kw: Any) -> dict[str, Any]:
    return deployment(members=[standalone(container())], cache="qwen", **kw)


def test_a_pod_mounting_a_hydrated_cache_waits_for_its_manifest_before_its_own_init_containers():
    dep = cached()
    dep["engines"][0]["members"][0]["template"]["spec"]["initContainers"] = [{"name": "convert", "image": "x/y:1"}]
    spec = pod_spec(dep, caches=[cache()])
    assert [c["name"] for c in spec["initContainers"]] == [CACHE_WAIT_CONTAINER, "convert"]
    wait = spec["initContainers"][0]
    assert wait["image"] == "docker.io/library/python:3.13-slim"  # the hydration Job's image: already pulled there
    assert wait["command"][-2:] == ["qwen", "/mnt/models/.gpufleet/manifest.json"]
    assert wait["volumeMounts"] == [{"name": "gpufleet-model-cache", "mountPath": "/mnt/models", "readOnly": True}]
    assert wait["securityContext"]["readOnlyRootFilesystem"] is True
    k8s_schemas.validate_objects(render(dep, caches=[cache()]))


def test_no_wait_where_no_job_writes_a_manifest_or_when_turned_off():
    adopted = cache(storage={"backend": "existing_pvc", "claim_name": "team-weights"})
    assert "initContainers" not in pod_spec(cached(), caches=[adopted])  # a customer's volume has no manifest
    assert "initContainers" not in pod_spec(cached(cache_wait={"enabled": False}), caches=[cache()])
    assert "initContainers" not in pod_spec(deployment())  # no cache
    spec = pod_spec(cached(cache_wait={"image": "registry.internal/busybox:1.37"}), caches=[cache()])
    assert spec["initContainers"][0]["image"] == "registry.internal/busybox:1.37"
    with pytest.raises(FleetValidationError, match=r"deployment\.cache_wait\.image: must be a container image"):
        render(cached(cache_wait={"image": "two words"}), caches=[cache()])


def test_kserve_and_a_template_with_its_own_wait_get_none_added():
    isvc = one(render(deployment(backend="kserve", cache="qwen"), caches=[cache()]), "LLMInferenceService")
    assert "initContainers" not in isvc["spec"]["template"]  # KServe mounts the volume itself, under its own name
    own = {"name": CACHE_WAIT_CONTAINER, "image": "mine:1", "command": ["true"]}
    dep = cached()
    dep["engines"][0]["members"][0]["template"]["spec"]["initContainers"] = [own]
    assert pod_spec(dep, caches=[cache()])["initContainers"] == [own]


def _start_wait(manifest: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["/bin/sh", "-c", CACHE_WAIT_SCRIPT, "qwen", str(manifest)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_the_wait_script_blocks_until_the_manifest_exists_and_then_exits_0(tmp_path):
    manifest = tmp_path / ".gpufleet" / "manifest.json"
    proc = _start_wait(manifest)
    try:
        time.sleep(0.5)
        assert proc.poll() is None, "the init container ended before the cache was hydrated"
    finally:
        proc.kill()
        out, _err = proc.communicate(timeout=10)
    assert re.search(rf"waiting for model cache qwen: {re.escape(str(manifest))} is written when its hydration", out)
    manifest.parent.mkdir()
    manifest.write_text("{}")
    proc = _start_wait(manifest)
    out, _err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert out.strip() == "gpufleet: model cache qwen is hydrated"
    assert CACHE_MANIFEST == "/mnt/models/.gpufleet/manifest.json"  # where the serving pods mount the volume
