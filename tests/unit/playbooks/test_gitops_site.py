"""site.yml in render mode on a copy of the example inventory, for Flux and for Argo CD (issue 26, GitOps-native
render): every file of the render directory is a real object, schema-valid for Kubernetes 1.34-1.37 and the pinned
Flux / Argo CD / LeaderWorkerSet / KServe CRD schemas; each cluster directory applies as it is (its namespaces are in
it); the fleet generator is under _fleet/; a second run writes nothing; switching the tool rewrites the releases; a
cluster removed from the inventory loses its owned files, and a file that is not ours stays and is reported."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from example_fleet import copy_example_inventory
from k8s_schemas import validate_render_dir
from playbook_run import ANSIBLE_PLAYBOOK, run_playbook

CLUSTERS = ["eks-us-east-1", "gke-europe-west4", "gke-us-central1", "onprem-a"]
REPO_URL = "https://git.example.com/fleet.git"


def site(inventory: Path, render: Path, *extra: str) -> str:
    return run_playbook(inventory, "site.yml", render, *extra)


def objects(render: Path, cluster: str) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted((render / cluster).rglob("*.yaml"))]


def recap_changed(out: str) -> set[int]:
    return {int(line.split("changed=")[1].split()[0]) for line in out.splitlines() if "changed=" in line}


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-playbook is not installed beside this Python")
def test_flux_then_argocd_render_directories_are_real_objects(tmp_path):
    inventory = copy_example_inventory(tmp_path / "inventory")
    render = tmp_path / "rendered"

    site(inventory, render)  # the default tool: flux
    counts = validate_render_dir(render)  # every file: schemas (CRDs too) and layout (namespaces present)
    assert sorted(counts) == ["_fleet", *CLUSTERS]
    # a Kustomization per cluster and sync layer, and the fleet routing artifact (_fleet/routing/, docs/routing.md:
    # its index and a ConfigMap per deployment of the example)
    assert counts["_fleet"] == 4 * len(CLUSTERS) + 1 + 3
    for cluster in CLUSTERS:
        objs = objects(render, cluster)
        kinds = {o["kind"] for o in objs}
        assert {"HelmRelease", "OCIRepository", "HelmRepository"} <= kinds
        assert not any(o["apiVersion"].startswith("serving.gpufleet.io") for o in objs)
        layers = {o["metadata"]["annotations"]["gpufleet.io/sync-layer"] for o in objs}
        assert layers == {"stack", "stack-config", "caches", "serving"}
        namespaces = {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"}
        assert "ml-team" in namespaces
    assert (render / "onprem-a/_cluster/namespace-research.yaml").is_file()  # serving objects only there
    assert (render / "_fleet/plan.json").is_file()  # the plan document beside the generator

    assert recap_changed(site(inventory, render)) == {0}

    out = site(inventory, render, "-e", "gpufleet_gitops=argocd", "-e", f"gpufleet_gitops_repo_url={REPO_URL}")
    assert "rendered as Argo CD Application argocd/lws" in out
    counts = validate_render_dir(render)
    assert counts["_fleet"] == 2 + 3  # the ApplicationSet and the fleet routing artifact (index + 3 deployments)
    appset = yaml.safe_load((render / "_fleet/argocd/applicationset-example.yaml").read_text())
    assert appset["spec"]["generators"][0]["git"]["repoURL"] == REPO_URL
    for cluster in CLUSTERS:
        objs = objects(render, cluster)
        assert not {"HelmRelease", "OCIRepository", "HelmRepository"} & {o["kind"] for o in objs}
        waves = {o["kind"]: int(o["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for o in objs}
        assert waves["Namespace"] < waves["Application"] < waves["PersistentVolumeClaim"] < waves["Service"]

    # A cluster leaves the inventory: every owned file of its directory goes, a file that is not ours stays.
    (render / "eks-us-east-1/ml-team/configmap-by-hand.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: by-hand, namespace: ml-team}\n"
    )
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    hosts["all"]["children"]["gpufleet_clusters"]["children"].pop("eks")
    for group in hosts["all"]["children"].values():
        (group.get("hosts") or {}).pop("eks-us-east-1", None)
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    (inventory / "host_vars/eks-us-east-1.yml").unlink()
    out = site(
        inventory,
        render,
        "-e",
        "gpufleet_gitops=argocd",
        "-e",
        f"gpufleet_gitops_repo_url={REPO_URL}",
        "-e",
        "gpufleet_allow_capacity_loss=true",
    )
    assert "eks-us-east-1: left the inventory; 1 file(s) kept" in out
    assert [str(p.relative_to(render)) for p in (render / "eks-us-east-1").rglob("*") if p.is_file()] == [
        "eks-us-east-1/ml-team/configmap-by-hand.yaml"
    ]
