"""The Hugging Face cache layout (issue 30, item 3) as the inventory, the hydration Job and the engine see it: the
Job runs the hydrator with --layout hf; the engine gets HF_HUB_CACHE, --model ORG/NAME --revision REV and
HF_HUB_OFFLINE=1, so one command works cached and uncached; the flat layout renders as before."""

from __future__ import annotations

import pytest
from render_case import (
    REPO,
    cache,
    container,
    deployment,
    engine_container,
    env,
    one,
    pods,
    render,
    standalone,
)

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelCache, parse
from ansible_collections.gpufleet.serving.plugins.module_utils.render.caches import HydrationOptions, cache_objects
from ansible_collections.gpufleet.serving.plugins.module_utils.render.serving import CACHE_PATH

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def hf_engine(given: dict, **cache_kw) -> dict:
    dep = deployment(members=[standalone(container(**given))], cache="qwen")
    kw = {"layout": "hf", **cache_kw}
    return engine_container(pods(one(render(dep, caches=[cache(**kw)]), "Deployment"))["template"])


@pytest.mark.parametrize(
    ("given", "args"),
    [
        ({}, [f"--model={REPO}", "--revision=main"]),
        ({"args": [f"--model={REPO}"]}, [f"--model={REPO}", "--revision=main"]),
        ({"args": [f"--model={REPO}", "--revision=v2"]}, [f"--model={REPO}", "--revision=v2"]),  # the user's wins
        ({"args": ["--port", "8000"]}, ["--port", "8000", f"--model={REPO}", "--revision=main"]),
    ],
)
def test_the_engine_loads_the_repo_from_the_hub_cache_offline(given, args):
    c = hf_engine(given)
    assert c["args"] == args
    assert env(c)["HF_HUB_CACHE"] == CACHE_PATH
    assert env(c)["HF_HUB_OFFLINE"] == "1"
    assert {"name": "gpufleet-model-cache", "mountPath": CACHE_PATH, "readOnly": True} in c["volumeMounts"]


def test_a_pinned_commit_is_the_revision_the_engine_loads():
    c = hf_engine({}, source={"hugging_face": {"repo": REPO, "revision": COMMIT}})
    assert c["args"] == [f"--model={REPO}", f"--revision={COMMIT}"]


def test_another_hub_model_or_a_shell_is_an_error_naming_the_fix():
    with pytest.raises(GpufleetError, match="loads model 'other/model', but cache 'qwen' holds"):
        hf_engine({"args": ["--model=other/model"]})
    with pytest.raises(GpufleetError, match="runs a shell script"):
        hf_engine({"command": ["/bin/sh", "-c", "exec vllm serve --port 8000"]})
    # A local path is the user's choice.
    assert hf_engine({"args": ["--model=/data/w"]})["args"] == ["--model=/data/w"]


def test_the_flat_layout_renders_as_before():
    dep = deployment(members=[standalone(container())], cache="qwen")
    c = engine_container(pods(one(render(dep, caches=[cache()]), "Deployment"))["template"])
    assert c["args"] == [f"--model={CACHE_PATH}", f"--served-model-name={REPO}"]
    assert "HF_HUB_CACHE" not in env(c)


def job_args(**cache_kw) -> list[str]:
    objs = cache_objects(
        cache(**cache_kw),
        {"name": "c1", "cache_storage_class": "rwx"},
        "print()",
        options=HydrationOptions(),
        fleet="f",
    )
    job = next(o for o in objs if o["kind"] == "Job")
    return next(c for c in job["spec"]["template"]["spec"]["containers"])["args"]


def test_the_hydration_job_writes_the_hf_layout_and_the_flat_job_is_unchanged():
    flat = job_args()
    assert "--layout" not in flat  # the flat default is left out: existing Jobs keep their names
    hf = job_args(layout="hf")
    assert hf[hf.index("--layout") + 1] == "hf"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            {"source": {"http": {"url": "https://example.com/w.bin"}}, "layout": "hf"},
            "layout hf needs a hugging_face source",
        ),
        (
            {"layout": "hf", "storage": {"backend": "existing_pvc", "claim_name": "w"}},
            "layout hf is written by the hydration Job",
        ),
        ({"layout": "huggingface"}, "layout: must be one of flat, hf"),
    ],
)
def test_a_bad_layout_is_an_error_naming_the_field(data, reason):
    with pytest.raises(FleetValidationError, match=reason):
        parse(ModelCache, cache(**data), "gpufleet_model_caches[0]")


def test_layout_is_reserved_for_the_cache():
    with pytest.raises(GpufleetError, match="extra_args must not set --layout"):
        HydrationOptions.from_mapping({"extra_args": ["--layout", "flat"]})
