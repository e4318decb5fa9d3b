"""The GitOps render of the example fleet, accepted object for object by a real API server (issue 26, done-when).

`make demo`'s render (site.yml on inventories/example, render mode) is made for Flux and for Argo CD; then, on a local
control plane (scripts/localfleet, one cluster) that has the pinned CRDs the objects need installed - Flux
(HelmRelease, HelmRepository, OCIRepository, Kustomization), Argo CD (Application, ApplicationSet), KServe's
LLMInferenceService(Config), Gateway API; LeaderWorkerSet comes with the local fleet, its webhooks running - every
cluster directory must be accepted by ``kubectl apply --server-side --dry-run=server -R -f <cluster dir>``, one
"serverside-applied" line per file, after only its own Namespace files were applied for real (a GitOps tool applies
Namespaces first). The fleet generator under ``_fleet/<namespace>/`` must be accepted the same way.

The CRDs are the upstream files at the versions tests/lib/crd_fetch.py pins (read from the verified Go module zips),
so the API server validates against the same structural schemas and CEL rules (x-kubernetes-validations) that the
offline check (tests/lib/k8s_schemas.py) cannot run. Set GPUFLEET_GITOPS_E2E_STATE to reuse a local fleet already up
from this module's one-cluster inventory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import crd_fetch
import pytest
import yaml
from conftest import LOCALFLEET, REPO, Fleet, wait_for
from example_fleet import copy_example_inventory
from k8s_schemas import validate_render_dir

STACK_INVENTORY = Path(__file__).resolve().parent / "serving_stack_inventory"
HOST = "ss-onprem"
REPO_URL = "https://git.example.com/fleet.git"
TOOLS = ("flux", "argocd")
#: Namespaces the GitOps tools themselves live in (created by their installation, never rendered).
TOOL_NAMESPACES = ("flux-system", "argocd")


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("gitops-e2e")
    inventory = work / "inventory"
    shutil.copytree(STACK_INVENTORY, inventory)
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    cluster_hosts = hosts["all"]["children"]["gpufleet_clusters"]["hosts"]
    for other in [h for h in cluster_hosts if h != HOST]:
        cluster_hosts.pop(other)
        (inventory / "host_vars" / f"{other}.yml").unlink()
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    reuse = os.environ.get("GPUFLEET_GITOPS_E2E_STATE")
    if reuse:
        yield Fleet(Path(reuse).resolve(), inventory, work)
        return
    state = work / "fleet"
    subprocess.run([sys.executable, str(LOCALFLEET), "up", str(inventory), str(state)], check=True)
    try:
        yield Fleet(state, inventory, work)
    finally:
        subprocess.run([sys.executable, str(LOCALFLEET), "down", str(state)], check=False)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example fleet rendered by site.yml, once per GitOps tool (each also passes the offline check)."""
    work = tmp_path_factory.mktemp("gitops-render")
    inventory = copy_example_inventory(work / "inventory")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".venv" / "collections"), ANSIBLE_NOCOLOR="1")
    out = {}
    for tool in TOOLS:
        render = work / f"rendered-{tool}"
        proc = subprocess.run(
            [
                str(Path(sys.executable).parent / "ansible-playbook"),
                "-i",
                str(inventory / "hosts.yml"),
                str(REPO / "playbooks" / "site.yml"),
                "-e",
                f"gpufleet_render_dir={render}",
                "-e",
                f"gpufleet_gitops={tool}",
                "-e",
                f"gpufleet_gitops_repo_url={REPO_URL}",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
        validate_render_dir(render)
        out[tool] = render
    return out


def kubectl(fleet: Fleet, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The local fleet's kubectl. Its field validation (strict, the default) first reads the API server's OpenAPI
    document, which with KServe's CRDs takes a while on a busy machine: a timeout reading it is retried."""
    binary = Path(json.loads((fleet.state / "fleet.json").read_text())["bin"]) / "kubectl"
    for _attempt in range(3):
        proc = subprocess.run(
            [str(binary), "--kubeconfig", str(fleet.state / "kubeconfigs" / HOST), *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if "failed to download openapi" not in proc.stderr:
            break
    return proc


def custom_kinds(render: Path) -> set[tuple[str, str]]:
    """(group, kind) of every object of the render directory whose kind a CRD of crd_fetch's pins defines."""
    known = crd_fetch.known_crds()
    found = set()
    for path in render.rglob("*.yaml"):
        if ".gpufleet" in path.parts:
            continue
        obj = yaml.safe_load(path.read_text())
        if (obj.get("apiVersion"), obj.get("kind")) in known:
            found.add((obj["apiVersion"].split("/")[0], obj["kind"]))
    return found


@pytest.fixture(scope="module")
def crds_installed(control_plane: Fleet, rendered: dict[str, Path]) -> Fleet:
    """The pinned CRDs of every custom kind the render directories hold, and the GitOps tools' namespaces."""
    wanted = set().union(*(custom_kinds(r) for r in rendered.values()))
    assert {("helm.toolkit.fluxcd.io", "HelmRelease"), ("argoproj.io", "Application")} <= wanted
    docs = []
    for doc in crd_fetch.crd_documents(sorted(wanted)):
        name = doc["metadata"]["name"]
        if kubectl(control_plane, "get", "crd", name).returncode == 0:
            continue  # installed by the local fleet itself (LeaderWorkerSet, with its webhooks): kept as it is
        doc["spec"].pop("conversion", None)  # no conversion webhook runs here
        doc.pop("status", None)
        docs.append(doc)
    if docs:
        proc = kubectl(control_plane, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))
        assert proc.returncode == 0, proc.stderr
        names = {d["metadata"]["name"] for d in docs}

        def established() -> bool:
            listed = kubectl(control_plane, "get", "crd", "-o", "json")
            items = json.loads(listed.stdout or "{}").get("items", []) if listed.returncode == 0 else []
            ready = {
                c["metadata"]["name"]
                for c in items
                if any(
                    x.get("type") == "Established" and x.get("status") == "True"
                    for x in (c.get("status") or {}).get("conditions") or []
                )
            }
            return names <= ready

        wait_for("the CRDs to be established", established, timeout=120, interval=1)
    for ns in TOOL_NAMESPACES:
        kubectl(control_plane, "create", "namespace", ns)
    return control_plane


@pytest.mark.parametrize("tool", TOOLS)
def test_every_cluster_directory_is_accepted_by_the_api_server(crds_installed: Fleet, rendered, tool):
    render = rendered[tool]
    clusters = sorted(p.name for p in render.iterdir() if p.is_dir() and not p.name.startswith((".", "_fleet")))
    assert clusters == ["eks-us-east-1", "gke-europe-west4", "gke-us-central1", "onprem-a"]
    for cluster in clusters:
        files = sorted((render / cluster).rglob("*.yaml"))
        namespaces = sorted((render / cluster / "_cluster").glob("namespace-*.yaml"))
        assert namespaces, f"{cluster}: no Namespace files"
        created = kubectl(crds_installed, "apply", "--server-side", *(a for p in namespaces for a in ("-f", str(p))))
        assert created.returncode == 0, created.stderr
        proc = kubectl(crds_installed, "apply", "--server-side", "--dry-run=server", "-R", "-f", str(render / cluster))
        assert proc.returncode == 0, f"{tool} {cluster}:\n{proc.stdout}\n{proc.stderr}"
        accepted = [line for line in proc.stdout.splitlines() if "serverside-applied (server dry run)" in line]
        assert len(accepted) == len(files), f"{tool} {cluster}: {len(accepted)} of {len(files)} files:\n{proc.stdout}"


@pytest.mark.parametrize("tool", TOOLS)
def test_the_fleet_generator_is_accepted_by_the_api_server(crds_installed: Fleet, rendered, tool):
    render = rendered[tool]
    (directory,) = [p for p in (render / "_fleet").iterdir() if p.is_dir() and p.name in TOOL_NAMESPACES]
    files = sorted(directory.glob("*.yaml"))
    assert files
    proc = kubectl(crds_installed, "apply", "--server-side", "--dry-run=server", "-f", str(directory))
    assert proc.returncode == 0, f"{tool}:\n{proc.stdout}\n{proc.stderr}"
    accepted = [line for line in proc.stdout.splitlines() if "serverside-applied (server dry run)" in line]
    assert len(accepted) == len(files)
