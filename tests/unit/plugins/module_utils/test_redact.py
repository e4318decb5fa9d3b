"""No error shows a credential: an inline kubeconfig, a URL's user info or token, an environment value (issue 23)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from example_fleet import example_fleet

from ansible_collections.gpufleet.serving.plugins.module_utils.connection import kube_connection
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import (
    FleetValidationError,
    GpufleetError,
    error_list,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.inventory import validate_fleet
from ansible_collections.gpufleet.serving.plugins.module_utils.redact import (
    credential_name,
    describe,
    redact_text,
    redact_url,
    value_credentials,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import (
    CacheObjectsError,
    HydrationOptions,
    cache_objects,
    summarize_status,
)

TOKEN = "eyJhbGciOiJSUzI1NiJ9.sentinel-bearer-token"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYsentinel"  # AWS secret keys may hold '/'
PASSWORD = "pr0xy-sentinel-pw"
INLINE_KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1:6443"}}],
    "users": [{"name": "admin", "user": {"token": TOKEN}}],
    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "admin"}}],
    "current-context": "c",
}


def everything(exc: BaseException) -> str:
    """Every text a failure carries: the message and each (path, reason)."""
    return str(exc) + repr(error_list(exc)) + repr(getattr(exc, "errors", ""))


def run(data: dict[str, Any]) -> Any:
    return validate_fleet(
        classes=data["classes"], hosts=data["hosts"], deployments=data["deployments"], caches=data["caches"]
    )


# --------------------------------------------------------------------------------------------------------------------
# The one redaction
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "None"),
        (3, "3"),
        (True, "True"),
        ("Boss", "'Boss'"),
        (INLINE_KUBECONFIG, "a mapping with keys apiVersion, clusters, contexts, current-context, kind, users"),
        ({}, "an empty mapping"),
        ([TOKEN], "a list of 1 item"),
        ([1, 2], "a list of 2 items"),
        (f"s3://AKIAEXAMPLE:{AWS_SECRET}@bucket/p", "'s3://bucket/p'"),
        (f"see http://u:{PASSWORD}@proxy:3128 now", "'see http://proxy:3128 now'"),
        (f"https://h/x?token={TOKEN}", "'https://h/x?token=<redacted>'"),
    ],
)
def test_describe_shows_no_credential(value: Any, shown: str):
    assert describe(value) == shown


def test_describe_a_secret_string_by_its_length_only():
    assert describe(TOKEN, secret=True) == f"a string of {len(TOKEN)} characters (not shown)"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://user:{PASSWORD}@h.example.com/m.bin", "https://h.example.com/m.bin"),
        (f"s3://AKIAEXAMPLE:{AWS_SECRET}@bucket/prefix", "s3://bucket/prefix"),  # '/' in the password
        ("http://user@h/", "http://h/"),
        (f"https://h/m.bin?X-Amz-Signature={TOKEN}&a=1", "https://h/m.bin?X-Amz-Signature=<redacted>&a=<redacted>"),
        ("http://proxy:3128", "http://proxy:3128"),
    ],
)
def test_redact_url(url: str, shown: str):
    assert redact_url(url) == shown


def test_redact_text_keeps_plain_urls_and_text():
    text = "pull https://hub.example.com/org/repo@v1 (see https://h:8443/x)"
    assert redact_text(text) == text
    assert PASSWORD not in redact_text(f"proxy error: http://u:{PASSWORD}@p:3128/ refused; 'ftp://a:{PASSWORD}@b'")


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "hf_token",
        "HUGGING_FACE_HUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "PROXY_PASSWORD",
        "FTP_PASSWD",
        "API_KEY",
        "OPENAI_APIKEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "BASIC_AUTH",
        "AUTHORIZATION",
        "OAUTH_CLIENT",
    ],
)
def test_credential_names(name: str):
    assert credential_name(name)


@pytest.mark.parametrize(
    "name", ["HF_ENDPOINT", "HTTPS_PROXY", "NO_PROXY", "PIP_INDEX_URL", "KEYBOARD_LAYOUT", "GIT_AUTHOR_NAME", "HOME"]
)
def test_names_that_are_no_credential(name: str):
    assert not credential_name(name)


@pytest.mark.parametrize(
    ("value", "found"),
    [
        (f"http://user:{PASSWORD}@proxy:3128", True),
        (f"user:{PASSWORD}@proxy:3128", True),  # HTTPS_PROXY without a scheme
        (f"https://idx.example.com/simple?token={TOKEN}", True),
        (f"https://a.example.com/simple https://u:{PASSWORD}@b.example.com/simple", True),
        ("http://proxy:3128", False),
        ("https://hub.example.com", False),
        ("localhost,.svc,10.0.0.0/8", False),
    ],
)
def test_value_credentials(value: str, found: bool):
    assert bool(value_credentials(value)) is found


# --------------------------------------------------------------------------------------------------------------------
# Fleet data (fleet_info): an inline kubeconfig, an S3 URI with keys
# --------------------------------------------------------------------------------------------------------------------


def test_an_inline_kubeconfig_is_rejected_by_its_keys_never_its_content():
    data = example_fleet()
    data["hosts"]["onprem-a"]["gpufleet_kubeconfig"] = copy.deepcopy(INLINE_KUBECONFIG)
    with pytest.raises(FleetValidationError) as info:
        run(data)
    assert TOKEN not in everything(info.value)
    assert "10.0.0.1" not in everything(info.value)
    ((path, reason),) = info.value.errors
    assert path == "hostvars['onprem-a'].gpufleet_kubeconfig"
    assert reason.startswith("must be the path of a kubeconfig file (got a mapping with keys apiVersion, clusters")


def test_a_kubeconfig_of_another_type_is_not_shown_either():
    data = example_fleet()
    data["hosts"]["onprem-a"]["gpufleet_kubeconfig"] = [TOKEN]
    with pytest.raises(FleetValidationError) as info:
        run(data)
    assert TOKEN not in everything(info.value)
    assert "got a list of 1 item" in str(info.value)


@pytest.mark.parametrize(
    "uri",
    [
        f"s3://AKIAEXAMPLE:{AWS_SECRET}@models/qwen",
        f"s3://AKIAEXAMPLE:{PASSWORD}@models/qwen",
        f"s3://{PASSWORD}@models/qwen",
    ],
)
def test_an_s3_uri_with_keys_is_rejected_without_repeating_them(uri: str):
    data = example_fleet()
    data["caches"][0]["source"] = {"s3": {"uri": uri}}
    with pytest.raises(FleetValidationError) as info:
        run(data)
    shown = everything(info.value)
    for secret in (AWS_SECRET, PASSWORD, "AKIAEXAMPLE", "K7MDENG"):
        assert secret not in shown
    cache_errors = [(p, r) for p, r in info.value.errors if "caches" in p]
    assert cache_errors and cache_errors[0][0] == "gpufleet_model_caches[0] (qwen-2-5-0-5b).source.s3.uri"
    assert "credentials_secret" in cache_errors[0][1]


def test_the_cache_filter_does_not_repeat_an_s3_secret_either():
    data = {"name": "c", "source": {"s3": {"uri": f"s3://AKIAEXAMPLE:{AWS_SECRET}@models/qwen"}}, "size": "1Gi"}
    with pytest.raises(FleetValidationError) as info:
        cache_objects(data, "gke-a", "print(1)", storage_class="x")
    assert AWS_SECRET not in everything(info.value) and "K7MDENG" not in everything(info.value)


def test_an_unmatched_pattern_shows_the_value_with_its_url_credentials_redacted():
    data = example_fleet()
    data["caches"][0]["source"] = {"s3": {"uri": "s3://models/qwen", "endpoint": f"ftp://u:{PASSWORD}@minio"}}
    with pytest.raises(FleetValidationError) as info:
        run(data)
    assert PASSWORD not in everything(info.value)


# --------------------------------------------------------------------------------------------------------------------
# Connections (the cluster_connection role's filter) and the cache role's options
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kubeconfig", [[INLINE_KUBECONFIG], (TOKEN,), 7.5])
def test_a_connection_error_never_shows_the_kubeconfig(kubeconfig: Any):
    with pytest.raises(GpufleetError) as info:
        kube_connection("c1", kubeconfig)
    assert TOKEN not in str(info.value)
    assert "gpufleet_kubeconfig must be a path or a kubeconfig mapping" in str(info.value)


def test_a_bad_cluster_argument_is_described_not_dumped():
    with pytest.raises(GpufleetError) as info:
        kube_connection({"name": "c1", "kubeconfig": INLINE_KUBECONFIG}, None, "ctx")  # type: ignore[arg-type]
    assert TOKEN not in str(info.value) and "a mapping with keys kubeconfig, name" in str(info.value)


@pytest.mark.parametrize(
    "options",
    [
        {"env": f"HF_TOKEN={TOKEN}"},
        {"env": [{"name": "HF_TOKEN", "value": TOKEN}]},
        {"env": [{"name": "HTTPS_PROXY", "value": f"http://u:{PASSWORD}@proxy:3128"}]},
        {"pip_packages": f"--index-url https://u:{PASSWORD}@pypi.example.com/simple"},
        {"extra_args": f"--endpoint-url=https://u:{PASSWORD}@h"},
        {"workers": f"https://u:{PASSWORD}@h"},
    ],
)
def test_hydration_option_errors_never_show_a_credential(options: dict[str, Any]):
    with pytest.raises(CacheObjectsError) as info:
        HydrationOptions.from_mapping(options)
    assert TOKEN not in str(info.value) and PASSWORD not in str(info.value)


def test_a_bad_status_entry_is_described_not_dumped():
    with pytest.raises(CacheObjectsError) as info:
        summarize_status([{"cache": "c", "cluster": "a", "status": "Broken", "message": f"http://u:{PASSWORD}@h"}])
    assert PASSWORD not in str(info.value)
    with pytest.raises(CacheObjectsError) as info:
        summarize_status([f"http://u:{PASSWORD}@h"])
    assert PASSWORD not in str(info.value)
