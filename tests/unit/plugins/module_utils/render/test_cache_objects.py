"""Model cache objects: PVC / ConfigMap / Job per cache and cluster, Job naming, secrets, storage classes, status."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from example_fleet import example_fleet
from k8s_schemas import validate_objects

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import (
    CHECK_SCRIPT,
    JOB_NAME_MAX,
    CacheObjectsError,
    HydrationOptions,
    adopted_check_job,
    as_cache,
    cache_objects,
    job_status,
    summarize_status,
)

REPO = Path(__file__).resolve().parents[5]
HYDRATOR = (REPO / "roles" / "model_cache" / "files" / "hydrate.py").read_text(encoding="utf-8")
TOKEN = "hf_unitTestSentinelTokenValue"

HF = {"hugging_face": {"repo": "Qwen/Qwen2.5-0.5B-Instruct", "revision": "main", "token_secret": "hf-token"}}
S3 = {
    "s3": {
        "uri": "s3://models-bucket/llama/70b",
        "endpoint": "https://s3.eu.example.com",
        "region": "eu-west-1",
        "credentials_secret": "s3-creds",
        "include": ["*.safetensors", "*.json"],
        "exclude": ["original/*"],
    }
}
HTTP = {"http": {"url": "https://example.com/models/tiny.gguf#sha256=" + "0" * 64}}


def cache(source: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    data = {"name": "qwen", "namespace": "ml-team", "source": copy.deepcopy(source or HF), "size": "20Gi"}
    data.update(extra)
    return data


def objects(data: dict[str, Any] | None = None, cluster: Any = "gke-a", **kwargs: Any) -> list[dict[str, Any]]:
    kwargs.setdefault("storage_class", "filestore-rwx")
    return cache_objects(data or cache(), cluster, HYDRATOR, **kwargs)


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


def container(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]["containers"][0]


def env_map(job: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(job)["env"]}


# --------------------------------------------------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------------------------------------------------


def test_pvc_backend_gives_pvc_configmap_job_in_apply_order():
    objs = objects()
    assert [o["kind"] for o in objs] == ["PersistentVolumeClaim", "ConfigMap", "Job"]
    pvc, cm, job = objs
    assert pvc["metadata"]["name"] == "gpufleet-cache-qwen"
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["storageClassName"] == "filestore-rwx"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert cm["immutable"] is True
    assert cm["data"] == {"hydrate.py": HYDRATOR}
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert {v["name"]: v for v in pod["volumes"]}["models"]["persistentVolumeClaim"] == {
        "claimName": pvc["metadata"]["name"]
    }
    assert {v["name"]: v for v in pod["volumes"]}["hydrator"]["configMap"]["name"] == cm["metadata"]["name"]
    assert container(job)["command"] == ["python3", "/opt/gpufleet/hydrate.py"]
    assert {m["mountPath"] for m in container(job)["volumeMounts"]} >= {"/mnt/models", "/opt/gpufleet"}
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"], spec["ttlSecondsAfterFinished"]) == (3, 21600, 604800)
    assert container(job)["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}}


def test_every_object_carries_the_four_labels_and_pods_too():
    objs = objects(cluster="eks-b")
    want = {
        "app.kubernetes.io/managed-by": "gpufleet.serving",
        "gpufleet.io/cache": "qwen",
        "gpufleet.io/cluster": "eks-b",
        "gpufleet.io/component": "model-cache",
    }
    for obj in objs:
        assert obj["metadata"]["labels"] == want
        assert obj["metadata"]["namespace"] == "ml-team"
    assert by_kind(objs)["Job"]["spec"]["template"]["metadata"]["labels"] == want


def test_existing_pvc_adopts_the_customer_volume_no_pvc_no_job():
    data = cache(storage={"backend": "existing_pvc", "claim_name": "customer-weights"})
    assert objects(data) == []
    # ... and needs no storage class at all.
    assert cache_objects(data, "bare-metal", HYDRATOR) == []


def test_existing_pvc_check_job_is_read_only_and_only_on_request():
    data = cache(storage={"backend": "existing_pvc", "claim_name": "customer-weights"})
    (job,) = cache_objects(data, "bare-metal", HYDRATOR, adopted_check=True)
    pod = job["spec"]["template"]["spec"]
    assert job["metadata"]["name"].startswith("gpufleet-check-qwen-")
    assert pod["volumes"] == [
        {"name": "models", "persistentVolumeClaim": {"claimName": "customer-weights", "readOnly": True}}
    ]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "models", "mountPath": "/mnt/models", "readOnly": True}]
    assert pod["automountServiceAccountToken"] is False
    assert "secretKeyRef" not in json.dumps(job)
    assert pod["containers"][0]["command"][:2] == ["python3", "-c"]
    # The flag only concerns adopted volumes; a cache with its own volume still gets PVC, ConfigMap and Job.
    own = cache_objects(cache(), "gke-a", HYDRATOR, storage_class="x", adopted_check=True)
    assert [o["kind"] for o in own] == ["PersistentVolumeClaim", "ConfigMap", "Job"]
    with pytest.raises(CacheObjectsError, match="for adopted PVCs"):
        adopted_check_job(as_cache(cache()), "gke-a", HydrationOptions())


def test_claim_name_override_is_used_by_pvc_and_job():
    objs = by_kind(objects(cache(storage={"backend": "pvc", "claim_name": "shared-weights"})))
    assert objs["PersistentVolumeClaim"]["metadata"]["name"] == "shared-weights"
    volumes = {v["name"]: v for v in objs["Job"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["models"]["persistentVolumeClaim"]["claimName"] == "shared-weights"


# --------------------------------------------------------------------------------------------------------------------
# Sources: arguments and credentials
# --------------------------------------------------------------------------------------------------------------------


def test_hugging_face_source_args_and_token_reference():
    job = by_kind(objects())["Job"]
    assert container(job)["args"] == [
        "--source",
        "hf://Qwen/Qwen2.5-0.5B-Instruct",
        "--dest",
        "/mnt/models",
        "--revision",
        "main",
        "--workers",
        "8",
    ]
    assert env_map(job)["HF_TOKEN"] == {"secretKeyRef": {"name": "hf-token", "key": "token"}}
    assert job["metadata"]["annotations"] == {
        "gpufleet.io/source": "hf://Qwen/Qwen2.5-0.5B-Instruct",
        "gpufleet.io/revision": "main",
    }


def test_public_hugging_face_repo_has_no_token_env():
    src = copy.deepcopy(HF)
    del src["hugging_face"]["token_secret"]
    job = by_kind(objects(cache(src)))["Job"]
    assert "HF_TOKEN" not in env_map(job)
    assert "secretKeyRef" not in json.dumps(job)


def test_s3_source_args_region_and_credential_references():
    job = by_kind(objects(cache(S3)))["Job"]
    assert container(job)["args"] == [
        "--source",
        "s3://models-bucket/llama/70b",
        "--dest",
        "/mnt/models",
        "--endpoint-url",
        "https://s3.eu.example.com",
        "--include",
        "*.safetensors",
        "--include",
        "*.json",
        "--exclude",
        "original/*",
        "--workers",
        "8",
    ]
    env = env_map(job)
    assert env["AWS_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "s3-creds", "key": "AWS_ACCESS_KEY_ID"}}
    assert env["AWS_SECRET_ACCESS_KEY"] == {"secretKeyRef": {"name": "s3-creds", "key": "AWS_SECRET_ACCESS_KEY"}}
    assert env["AWS_SESSION_TOKEN"] == {
        "secretKeyRef": {"name": "s3-creds", "key": "AWS_SESSION_TOKEN", "optional": True}
    }
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "eu-west-1"
    assert "gpufleet.io/revision" not in job["metadata"]["annotations"]


def test_http_source_args_and_no_credentials():
    job = by_kind(objects(cache(HTTP)))["Job"]
    assert container(job)["args"] == ["--source", HTTP["http"]["url"], "--dest", "/mnt/models", "--workers", "8"]
    assert "secretKeyRef" not in json.dumps(job)


def test_secret_keys_are_configurable():
    job = by_kind(objects(cache(S3), options={"secret_keys": {"aws_access_key_id": "access-key"}}))["Job"]
    env = env_map(job)
    assert env["AWS_ACCESS_KEY_ID"]["secretKeyRef"]["key"] == "access-key"
    assert env["AWS_SECRET_ACCESS_KEY"]["secretKeyRef"]["key"] == "AWS_SECRET_ACCESS_KEY"  # others keep defaults


@pytest.mark.parametrize("source", [HF, S3, HTTP], ids=["hf", "s3", "http"])
def test_no_secret_and_no_token_value_in_any_object(source):
    objs = objects(cache(source), options={"env": [{"name": "HF_ENDPOINT", "value": "https://hub.example.com"}]})
    assert all(o["kind"] != "Secret" for o in objs)
    text = json.dumps(objs)
    assert TOKEN not in text
    assert "stringData" not in text
    # Credentials are only ever references.
    for env in container(by_kind(objs)["Job"])["env"]:
        if env["name"] in ("HF_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            assert set(env) == {"name", "valueFrom"}


# --------------------------------------------------------------------------------------------------------------------
# Job naming
# --------------------------------------------------------------------------------------------------------------------


def job_name_of(data: dict[str, Any], cluster: str = "gke-a", **kwargs: Any) -> str:
    return by_kind(objects(data, cluster, **kwargs))["Job"]["metadata"]["name"]


def test_job_name_changes_with_revision_and_source():
    base = job_name_of(cache())
    other_rev = copy.deepcopy(HF)
    other_rev["hugging_face"]["revision"] = "7ae557604adf67be50417f59c2c2f167def9a775"
    other_repo = copy.deepcopy(HF)
    other_repo["hugging_face"]["repo"] = "Qwen/Qwen2.5-1.5B-Instruct"
    other_filter = copy.deepcopy(HF)
    other_filter["hugging_face"]["include"] = ["*.safetensors"]
    names = {base, job_name_of(cache(other_rev)), job_name_of(cache(other_repo)), job_name_of(cache(other_filter))}
    assert len(names) == 4
    assert all(n.startswith("gpufleet-hydrate-qwen-") for n in names)


def test_job_name_changes_with_anything_the_pod_runs():
    base = job_name_of(cache())
    assert job_name_of(cache(), options={"image": "registry.example.com/hydrator:1"}) != base
    assert job_name_of(cache(), options={"resources": {"limits": {"memory": "8Gi"}}}) != base
    other_script = cache_objects(cache(), "gke-a", HYDRATOR + "\n# changed\n", storage_class="x")[2]
    assert other_script["metadata"]["name"] != base


def test_job_name_covers_the_whole_immutable_pod_template_metadata_too():
    """A Job's pod template is immutable, its metadata included: a change there must be a new Job, not a failed apply."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import job_name

    job = by_kind(objects(cache()))["Job"]
    model = as_cache(cache())
    changed = copy.deepcopy(job["spec"])
    changed["template"]["metadata"]["labels"]["example.com/team"] = "a"
    annotated = copy.deepcopy(job["spec"])
    annotated["template"]["metadata"]["annotations"] = {"example.com/x": "1"}
    names = {job_name(model, job["spec"]), job_name(model, changed), job_name(model, annotated)}
    assert job["metadata"]["name"] == job_name(model, job["spec"])
    assert len(names) == 3


def test_http_secrets_reach_the_job_as_references_only():
    basic = {"http": {"url": "https://h.example.com/m.gguf", "credentials_secret": "http-basic"}}
    env = env_map(by_kind(objects(cache(basic)))["Job"])
    assert env["GPUFLEET_HTTP_USERNAME"] == {"secretKeyRef": {"name": "http-basic", "key": "username"}}
    assert env["GPUFLEET_HTTP_PASSWORD"] == {"secretKeyRef": {"name": "http-basic", "key": "password"}}
    presigned = {"http": {"url": "https://b.s3.amazonaws.com/m.gguf", "url_secret": "presigned-url"}}
    job = by_kind(objects(cache(presigned)))["Job"]
    assert env_map(job)["GPUFLEET_SOURCE_URL"] == {"secretKeyRef": {"name": "presigned-url", "key": "url"}}
    assert container(job)["args"][:2] == ["--source", "https://b.s3.amazonaws.com/m.gguf"]


@pytest.mark.parametrize(
    "url",
    [
        "https://user:hunter2@h.example.com/m.gguf",
        "https://b.s3.amazonaws.com/m.gguf?X-Amz-Algorithm=AWS4&X-Amz-Signature=hunter2",
    ],
)
def test_a_credential_url_never_becomes_an_object(url):
    """Used to be copied into every cluster's Job args and the gpufleet.io/source annotation."""
    with pytest.raises(FleetValidationError) as info:
        objects(cache({"http": {"url": url}}))
    assert "hunter2" not in str(info.value)
    assert "source.http.url" in str(info.value)


def test_job_name_is_stable_and_the_same_on_every_cluster():
    assert job_name_of(cache()) == job_name_of(cache())
    assert job_name_of(cache(), "gke-a") == job_name_of(cache(), "eks-b", storage_class="efs-sc")


def test_job_name_fits_a_label_value_even_for_long_cache_names():
    long_name = "a-very-long-cache-name-that-is-exactly-sixty-three-characters-x"
    assert len(long_name) == 63
    name = job_name_of(cache(name=long_name))
    assert len(name) <= JOB_NAME_MAX
    assert name[-11] == "-" and not name[:-11].endswith("-")
    validate_objects(objects(cache(name=long_name)))


# --------------------------------------------------------------------------------------------------------------------
# Storage class
# --------------------------------------------------------------------------------------------------------------------


def test_storage_class_resolution_order():
    cluster = {"name": "gke-a", "cache_storage_class": "filestore-rwx"}
    pvc = cache_objects(cache(), cluster, HYDRATOR)[0]
    assert pvc["spec"]["storageClassName"] == "filestore-rwx"
    own = cache(storage={"backend": "pvc", "storage_class": "premium-rwx"})
    assert cache_objects(own, cluster, HYDRATOR)[0]["spec"]["storageClassName"] == "premium-rwx"
    # An explicit storage_class argument is the cluster default, the cache's own class still wins.
    assert cache_objects(cache(), cluster, HYDRATOR, storage_class="other")[0]["spec"]["storageClassName"] == "other"
    assert cache_objects(own, cluster, HYDRATOR, storage_class="other")[0]["spec"]["storageClassName"] == "premium-rwx"


@pytest.mark.parametrize(
    "cluster", ["bare-metal-x", {"name": "bare-metal-x"}, {"name": "bare-metal-x", "cache_storage_class": None}]
)
def test_missing_storage_class_fails_naming_the_cluster(cluster):
    with pytest.raises(CacheObjectsError) as err:
        cache_objects(cache(), cluster, HYDRATOR)
    assert "cache 'qwen' on cluster 'bare-metal-x'" in str(err.value)
    assert "gpufleet_cache_storage_class" in str(err.value)
    assert isinstance(err.value, GpufleetError)


# --------------------------------------------------------------------------------------------------------------------
# Options and validation
# --------------------------------------------------------------------------------------------------------------------


def test_options_are_applied():
    opts = {
        "image": "registry.example.com/hydrator:1.0",
        "image_pull_policy": "Always",
        "pip_packages": [],
        "workers": 16,
        "extra_args": ["--refresh", "--log-format", "json"],
        "backoff_limit": 1,
        "active_deadline_seconds": 600,
        "ttl_seconds_after_finished": None,
        "env": [{"name": "HOME", "value": "/scratch"}, {"name": "HF_ENDPOINT", "value": "https://hub.example.com"}],
        "node_selector": {"pool": "cpu"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "service_account_name": "hydrator",
        "pvc_annotations": {"argocd.argoproj.io/sync-options": "Prune=false"},
    }
    pvc, _cm, job = objects(options=opts)
    pod = job["spec"]["template"]["spec"]
    assert "initContainers" not in pod and "ttlSecondsAfterFinished" not in job["spec"]
    assert {v["name"] for v in pod["volumes"]} == {"models", "hydrator", "tmp"}
    assert container(job)["image"] == "registry.example.com/hydrator:1.0"
    assert container(job)["imagePullPolicy"] == "Always"
    assert container(job)["args"][-5:] == ["--workers", "16", "--refresh", "--log-format", "json"]
    env = env_map(job)
    assert env["HOME"] == "/scratch" and env["HF_ENDPOINT"] == "https://hub.example.com"
    assert [e["name"] for e in container(job)["env"]].count("HOME") == 1  # no duplicate keys for server-side apply
    assert "PYTHONPATH" not in env
    assert pod["nodeSelector"] == {"pool": "cpu"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert pod["serviceAccountName"] == "hydrator"
    assert pod["automountServiceAccountToken"] is False
    assert (job["spec"]["backoffLimit"], job["spec"]["activeDeadlineSeconds"]) == (1, 600)
    assert pvc["metadata"]["annotations"]["argocd.argoproj.io/sync-options"] == "Prune=false"


def test_default_pip_packages_run_in_an_init_container():
    job = by_kind(objects())["Job"]
    (init,) = job["spec"]["template"]["spec"]["initContainers"]
    assert init["command"][:4] == ["python3", "-m", "pip", "install"]
    assert init["command"][-2:] == ["huggingface_hub==2.4.0", "boto3==1.44.5"]
    assert env_map(job)["PYTHONPATH"] == "/opt/pydeps"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workers": 0}, "workers must be an integer >= 1"),
        ({"backoff_limit": True}, "backoff_limit must be an integer"),
        ({"image": ""}, "image must be a non-empty"),
        ({"image_pull_policy": "Sometimes"}, "image_pull_policy must be one of"),
        ({"pip_packages": "boto3"}, "pip_packages must be a list of strings"),
        ({"extra_args": ["--revision", "v2"]}, "extra_args must not set --revision"),
        ({"extra_args": ["--dest=/tmp"]}, "extra_args must not set --dest"),
        ({"env": [{"value": "x"}]}, r"env\[0\] needs a name"),
        ({"resources": []}, "resources must be a mapping"),
        ({"secret_keys": {"gcs_key": "k"}}, "secret_keys has unknown entries gcs_key"),
        ({"colour": "blue"}, "unknown option"),
    ],
)
def test_bad_options_are_rejected(options, message):
    with pytest.raises(CacheObjectsError, match=message):
        HydrationOptions.from_mapping(options)


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["--des", "/elsewhere"], "--des (abbreviates --dest)"),
        (["--de=/elsewhere"], "--de (abbreviates --dest)"),
        (["--rev", "v2"], "--rev (abbreviates --revision)"),
        (["--revision=v2"], "--revision"),
        (["--sou", "hf://other/repo"], "--sou (abbreviates --source)"),
        (["--endpoint", "https://other"], "--endpoint (abbreviates --endpoint-url)"),
        (["--inc=*.bin"], "--inc (abbreviates --include)"),
        (["--ex", "*"], "--ex (abbreviates --exclude)"),
        (["--work", "64"], "--work (abbreviates --workers)"),
    ],
)
def test_extra_args_refuse_abbreviations_of_the_options_the_cache_sets(args, shown):
    with pytest.raises(CacheObjectsError) as err:
        HydrationOptions.from_mapping({"extra_args": args})
    assert f"extra_args must not set {shown}:" in str(err.value)
    assert "/elsewhere" not in str(err.value)


def test_extra_args_that_abbreviate_nothing_reserved_pass():
    opts = HydrationOptions.from_mapping(
        {"extra_args": ["--verify", "--refresh", "--no-verify-etag", "--digest-retries", "3"]}
    )
    assert opts.extra_args[-1] == "3"


@pytest.mark.parametrize(
    ("env", "path", "what"),
    [
        ([{"name": "HF_TOKEN", "value": TOKEN}], "env[0].value", "HF_TOKEN looks like a credential"),
        (
            [{"name": "HOME", "value": "/scratch"}, {"name": "PROXY_PASSWORD", "value": TOKEN}],
            "env[1].value",
            "PROXY_PASSWORD looks like a credential",
        ),
        ([{"name": "MY_API_KEY", "value": TOKEN}], "env[0].value", "MY_API_KEY looks like a credential"),
        (
            [{"name": "HTTPS_PROXY", "value": f"http://user:{TOKEN}@proxy:3128"}],
            "env[0].value",
            "the value of HTTPS_PROXY carries a user name or password",
        ),
        (
            [{"name": "HTTPS_PROXY", "value": f"user:{TOKEN}@proxy:3128"}],
            "env[0].value",
            "the value of HTTPS_PROXY carries a user name or password",
        ),
        (
            [{"name": "PIP_INDEX_URL", "value": f"https://pypi.example.com/simple?token={TOKEN}"}],
            "env[0].value",
            "the value of PIP_INDEX_URL carries credential query parameter(s) token",
        ),
    ],
)
def test_credentials_in_env_values_are_refused_pointing_at_secrets(env, path, what):
    with pytest.raises(CacheObjectsError) as err:
        HydrationOptions.from_mapping({"env": env})
    message = str(err.value)
    assert f"{path}: {what}" in message
    assert "secretKeyRef" in message and "model_cache_secrets" in message
    assert TOKEN not in message
    with pytest.raises(CacheObjectsError):  # the filter's path: nothing is rendered
        objects(options={"env": env})


def test_env_without_credential_values_is_rendered():
    env = [
        {"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"},
        {"name": "NO_PROXY", "value": "localhost,.svc"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
        {"name": "KEYBOARD_LAYOUT", "value": "us"},
    ]
    job = by_kind(objects(options={"env": env}))["Job"]
    assert env_map(job)["HTTPS_PROXY"] == "http://proxy.example.com:3128"
    assert env_map(job)["HF_TOKEN"] == {"secretKeyRef": {"name": "hf", "key": "token"}}


@pytest.mark.parametrize("size", ["-5Gi", "0", 0, "0Gi", "-1"])
def test_a_cache_size_must_be_positive(size):
    with pytest.raises(FleetValidationError) as err:
        objects(cache(size=size))
    assert [path for path, _reason in err.value.errors] == ["gpufleet_model_caches[name=qwen].size"]
    assert "greater than zero" in str(err.value)


def test_bad_cache_fails_with_the_field_path():
    bad = cache()
    bad["source"]["hugging_face"]["repo"] = "not a repo"
    with pytest.raises(FleetValidationError, match=r"source\.hugging_face\.repo"):
        objects(bad)
    with pytest.raises(CacheObjectsError, match="a cache must be a mapping"):
        cache_objects(["qwen"], "gke-a", HYDRATOR, storage_class="x")
    with pytest.raises(CacheObjectsError, match="hydrator"):
        cache_objects(cache(), "gke-a", "  ", storage_class="x")
    with pytest.raises(CacheObjectsError, match="DNS label"):
        cache_objects(cache(), "GKE_A", HYDRATOR, storage_class="x")


# --------------------------------------------------------------------------------------------------------------------
# Schemas (Kubernetes 1.34 - 1.37, strict)
# --------------------------------------------------------------------------------------------------------------------


def test_example_fleet_cache_objects_are_schema_valid_on_every_cluster():
    fleet = example_fleet()
    objs = []
    for host, hostvars in fleet["hosts"].items():
        cluster = {"name": host, "cache_storage_class": hostvars.get("gpufleet_cache_storage_class")}
        for data in fleet["caches"]:
            objs.extend(cache_objects(data, cluster, HYDRATOR))
    assert len(objs) == 3 * len(fleet["hosts"])
    validate_objects(objs)


@pytest.mark.parametrize("source", [HF, S3, HTTP], ids=["hf", "s3", "http"])
def test_every_source_and_option_set_is_schema_valid(source):
    full = {
        "pip_packages": [],
        "extra_args": ["--verify"],
        "env": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
        "node_selector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "service_account_name": "hydrator",
        "ttl_seconds_after_finished": None,
        "pod_security_context": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000},
    }
    adopted = cache(source, name="adopted", storage={"backend": "existing_pvc", "claim_name": "weights"})
    validate_objects(
        [
            *objects(cache(source)),
            *objects(cache(source), options=full),
            *cache_objects(adopted, "gke-a", HYDRATOR, adopted_check=True),
        ]
    )


# --------------------------------------------------------------------------------------------------------------------
# The adopted-PVC check script (runs here with this Python)
# --------------------------------------------------------------------------------------------------------------------


def run_check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHECK_SCRIPT, str(root)], capture_output=True, text=True, check=False)


def test_check_script_needs_the_manifest_not_just_any_file(tmp_path):
    (tmp_path / "lost+found").mkdir()  # a fresh ext4-style volume is not empty
    (tmp_path / "model.safetensors").write_bytes(b"x" * 10)
    result = run_check(tmp_path)
    assert result.returncode == 4 and "no completion manifest" in result.stdout


def test_check_script_verifies_listed_files_and_sizes(tmp_path):
    (tmp_path / ".gpufleet").mkdir()
    (tmp_path / "model.safetensors").write_bytes(b"x" * 10)
    manifest = {
        "files": [{"path": "model.safetensors", "size": 10}],
        "bytes": 10,
        "source": {"uri": "hf://Qwen/Qwen2.5-0.5B-Instruct"},
        "revision": {"requested": "main", "resolved": "abc123"},
    }
    (tmp_path / ".gpufleet" / "manifest.json").write_text(json.dumps(manifest))
    ok = run_check(tmp_path)
    assert ok.returncode == 0, ok.stdout
    assert json.loads(ok.stdout) == {
        "ready": True,
        "files": 1,
        "bytes": 10,
        "source": "hf://Qwen/Qwen2.5-0.5B-Instruct",
        "revision": "abc123",
    }
    manifest["files"].append({"path": "../outside", "size": 1})
    manifest["files"][0]["size"] = 11
    (tmp_path / ".gpufleet" / "manifest.json").write_text(json.dumps(manifest))
    bad = run_check(tmp_path)
    assert bad.returncode == 6
    assert "2 file(s) missing or of the wrong size" in bad.stdout


# --------------------------------------------------------------------------------------------------------------------
# Job status
# --------------------------------------------------------------------------------------------------------------------


def job(conditions: list[dict[str, Any]] | None = None, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "gpufleet-hydrate-qwen-0123456789", "namespace": "ml-team"},
        "status": {"conditions": conditions or [], **status},
    }


def pod(name: str, created: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": created}, "status": status}


def terminated(name: str, code: int, reason: str = "Error") -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": code, "reason": reason}}}


def test_job_status_complete_is_ready():
    out = job_status(
        job(
            [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}],
            startTime="2026-11-21T10:00:00Z",
            completionTime="2026-11-21T10:04:00Z",
        )
    )
    assert (out["status"], out["finished"]) == ("Ready", True)
    assert "completion manifest" in out["message"] and "10:04:00Z" in out["message"]


def test_job_status_failed_explains_the_hydrator_exit_code_and_points_at_the_log():
    pods = [
        pod("p-old", "2026-11-21T10:00:00Z", containerStatuses=[terminated("hydrate", 7)]),
        pod("p-new", "2026-11-21T10:05:00Z", containerStatuses=[terminated("hydrate", 3)]),
    ]
    failed = job(
        [
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
            }
        ]
    )
    out = job_status(failed, pods)
    assert (out["status"], out["reason"], out["finished"]) == ("Failed", "BackoffLimitExceeded", True)
    assert "exit code 3: authentication or authorization failed" in out["message"]
    assert (out["pod"], out["container"]) == ("p-new", "hydrate")


def test_job_status_failed_init_container_points_at_its_log():
    pods = [pod("p", "t", initContainerStatuses=[terminated("install-deps", 1)], containerStatuses=[])]
    out = job_status(job([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]), pods)
    assert out["container"] == "install-deps"
    assert "install-deps (init) exit code 1" in out["message"]


def test_job_status_deadline_and_disk_full():
    pods = [pod("p", "t", containerStatuses=[terminated("hydrate", 5)])]
    out = job_status(job([{"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded"}]), pods)
    assert out["status"] == "Failed" and "DeadlineExceeded" in out["message"] and "disk full" in out["message"]


def test_job_status_running_is_hydrating_and_waiting_is_pending_with_the_reason():
    running = [pod("p", "t", phase="Running", containerStatuses=[{"name": "hydrate", "state": {"running": {}}}])]
    assert job_status(job(active=1), running)["status"] == "Hydrating"
    assert job_status(job(active=1, ready=1), [])["status"] == "Hydrating"
    unscheduled = [
        pod(
            "p",
            "t",
            phase="Pending",
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "message": "pod has unbound immediate PersistentVolumeClaims",
                }
            ],
        )
    ]
    out = job_status(job(active=1), unscheduled)
    assert (out["status"], out["finished"]) == ("Pending", False)
    assert "unbound immediate PersistentVolumeClaims" in out["message"]
    pulling = [
        pod("p", "t", containerStatuses=[{"name": "hydrate", "state": {"waiting": {"reason": "ImagePullBackOff"}}}])
    ]
    assert "ImagePullBackOff" in job_status(job(active=1), pulling)["message"]
    assert job_status(job(), [])["status"] == "Pending"


def test_job_status_stuck_pod_is_failed_at_once():
    stuck = [
        pod(
            "p",
            "t",
            containerStatuses=[
                {
                    "name": "hydrate",
                    "state": {
                        "waiting": {"reason": "CreateContainerConfigError", "message": 'secret "hf-token" not found'}
                    },
                }
            ],
        )
    ]
    out = job_status(job(active=1), stuck)
    assert (out["status"], out["reason"], out["finished"]) == ("Failed", "PodStuck", True)
    assert 'secret "hf-token" not found' in out["message"]


def test_job_status_of_a_missing_job():
    out = job_status(None, [])
    assert (out["status"], out["reason"], out["finished"]) == ("Failed", "JobNotFound", True)


def test_false_conditions_do_not_count():
    assert job_status(job([{"type": "Complete", "status": "False"}]), [])["status"] == "Pending"


# --------------------------------------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------------------------------------


def test_summary_counts_ready_and_lists_missing_clusters_as_failed():
    statuses = [
        {"cache": "qwen", "cluster": "gke-a", "status": "Ready", "message": "ok"},
        {"cache": "qwen", "cluster": "eks-b", "status": "Hydrating", "message": "running"},
    ]
    caches = [{"name": "qwen", "candidate_clusters": ["eks-b", "gke-a", "onprem-c", "limited-out"]}]
    out = summarize_status(statuses, caches, hosts=["eks-b", "gke-a", "onprem-c"])
    assert out["summary"] == "1/3 ready (1 hydrating, 1 failed)"
    assert out["lines"][-1] == out["summary"]
    assert out["lines"][0].split() == ["CACHE", "CLUSTER", "STATUS", "MESSAGE"]
    assert [(r["cluster"], r["status"]) for r in out["caches"]] == [
        ("eks-b", "Hydrating"),
        ("gke-a", "Ready"),
        ("onprem-c", "Failed"),
    ]
    assert out["failures"] == [
        "qwen on onprem-c: no status reported: the play stopped on this cluster before it finished"
    ]


def test_summary_of_a_render_run_and_of_two_out_of_three():
    rendered = [{"cache": "qwen", "cluster": c, "status": "Rendered"} for c in ("a", "b", "c", "d")]
    assert summarize_status(rendered)["summary"] == "4/4 rendered"
    mixed = [
        {"cache": "qwen", "cluster": "a", "status": "Ready"},
        {"cache": "qwen", "cluster": "b", "status": "Ready"},
        {"cache": "qwen", "cluster": "c", "status": "Failed", "message": "x" * 500},
    ]
    out = summarize_status(mixed)
    assert out["summary"] == "2/3 ready (1 failed)"
    assert max(len(line) for line in out["lines"]) < 220  # long messages are shortened in the table only
    assert out["failures"] == ["qwen on c: " + "x" * 500]


def test_summary_rejects_bad_entries():
    with pytest.raises(CacheObjectsError, match="must be one of"):
        summarize_status([{"cache": "q", "cluster": "a", "status": "Done"}])
    with pytest.raises(CacheObjectsError, match="list of status entries"):
        summarize_status({"cache": "q"})


def test_default_pip_packages_are_the_versions_the_project_tests_with():
    pins = {}
    for line in (REPO / "requirements-dev.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep:
            pins[name.strip().lower().replace("-", "_")] = version.strip()
    defaults = dict(p.split("==", 1) for p in HydrationOptions().pip_packages)
    assert defaults == {"huggingface_hub": pins["huggingface_hub"], "boto3": pins["boto3"]}
