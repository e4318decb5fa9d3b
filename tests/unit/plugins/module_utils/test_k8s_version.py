"""k8s/version.py: the one Kubernetes version type, its two grammars and the one minimum, and that models, the CEL
engine, the allocator features, placement and the providers read versions alike."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils import dra_cel, eks, gke, placement, preflight
from ansible_collections.gpufleet.serving.plugins.module_utils.dra import features
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.k8s.version import (
    MIN_DRA_KUBERNETES,
    KubernetesVersion,
    supported,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.models import PlacementCluster

V = KubernetesVersion


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("1.34", V(1, 34)),
        ("1.36.2", V(1, 36, 2)),
        ("1.34.1-gke.1431000", V(1, 34, 1, "-gke.1431000")),
        ("0.0", V(0, 0)),
    ],
)
def test_declared_versions(text, parsed):
    version = V.parse(text)
    assert (version.major, version.minor, version.patch, version.suffix) == (
        parsed.major,
        parsed.minor,
        parsed.patch,
        parsed.suffix,
    )
    assert str(version) == text


@pytest.mark.parametrize(
    "text",
    ["v1.34", "1", "1.34 ", " 1.34", "1.34.1.2", "01.34", "1.34-gke.1", "1.34.1+k3s1", "latest", "1." + "1" * 70],
)
def test_what_is_not_a_declared_version(text):
    with pytest.raises(ValueError, match=r"must be a Kubernetes version: MAJOR\.MINOR \(1\.34\), MAJOR\.MINOR\.PATCH"):
        V.parse(text)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("v1.34.1", V(1, 34, 1)),
        ("v1.35.2-eks-3025e55", V(1, 35, 2, "-eks-3025e55")),
        ("v1.34.1+k3s1", V(1, 34, 1, "+k3s1")),
        (" 1.34 ", V(1, 34)),
        ("1.34.1-gke.1431000", V(1, 34, 1, "-gke.1431000")),
    ],
)
def test_reported_versions(text, parsed):
    assert V.parse_reported(text) == parsed


@pytest.mark.parametrize("text", ["latest", "1", "1.34x", "1.34.1.2", "", "v"])
def test_what_is_not_a_reported_version(text):
    assert V.parse_reported(text) is None


def test_order_equality_and_minor_release():
    assert V(1, 33, 9) < V(1, 34) < V(1, 34, 1) < V(1, 35)
    assert V(1, 34) == V(1, 34, 0) and hash(V(1, 34)) == hash(V(1, 34, 0))
    assert V(1, 34, 1, "-gke.1") == V(1, 34, 1, "-gke.2")  # a provider suffix does not order
    assert V.parse("1.34.1-gke.1431000").minor_version == V(1, 34) and str(V(1, 34, 1).minor_version) == "1.34"
    assert V(1, 35, 2).release == (1, 35)
    assert sorted([V(1, 36), V(1, 34, 2), V(1, 35)]) == [V(1, 34, 2), V(1, 35), V(1, 36)]


def test_an_observed_version_matches_to_the_precision_declared():
    assert V(1, 34, 5).matches(V.parse("1.34"))
    assert not V(1, 35, 0).matches(V.parse("1.34"))
    assert V(1, 34, 1, "+k3s1").matches(V.parse("1.34.1-gke.1431000"))
    assert not V(1, 34, 2).matches(V.parse("1.34.1"))
    assert not V(1, 34).matches(V.parse("1.34.1"))


def test_the_minimum_is_dra_ga():
    assert V(1, 34) == MIN_DRA_KUBERNETES
    assert supported("1.34") == V(1, 34)
    with pytest.raises(ValueError, match=r"^'1\.33\.9' is older than 1\.34: DRA \(resource\.k8s\.io/v1\) is GA from"):
        supported("1.33.9")


@pytest.mark.parametrize("text", ["1.33", "1.33.9", "1.34", "1.34.0", "1.35.1-gke.7", "2.0"])
def test_every_reader_agrees_on_what_is_supported(text):
    """The models, the CEL engine and the preflight of an existing cluster hold one minimum."""
    ok = V.parse(text) >= MIN_DRA_KUBERNETES

    try:
        PlacementCluster(name="c", kubernetes_version=text)
        model_ok = True
    except ValueError as exc:
        assert "older than 1.34" in str(exc)
        model_ok = False

    try:
        dra_cel.compile_selector("true", text)
        cel_ok = True
    except dra_cel.SelectorCompileError as exc:
        assert "is not supported" in str(exc)
        cel_ok = False

    observed = preflight.Observed(git_version=f"v{text}", group_versions=frozenset())
    cluster = _existing_cluster()
    findings = [f for f in preflight.check_cluster(cluster, {}, observed) if f.check == "version"]
    preflight_ok = findings[0].severity == "ok"

    assert (model_ok, cel_ok, preflight_ok) == (ok, ok, ok)


def _existing_cluster():
    from ansible_collections.gpufleet.serving.plugins.module_utils.models import Cluster

    return Cluster(name="c", provider="existing", kubeconfig="/k")


def test_the_cel_engine_reads_the_minor_release():
    assert dra_cel.parse_kubernetes_version("v1.35.2-gke.1") == (1, 35)
    assert dra_cel.parse_kubernetes_version(V(1, 36, 1)) == (1, 36)
    assert dra_cel.parse_kubernetes_version(None) is None
    with pytest.raises(dra_cel.SelectorCompileError, match=r"invalid Kubernetes version 'latest': expected MAJOR"):
        dra_cel.parse_kubernetes_version("latest")
    with pytest.raises(
        dra_cel.SelectorCompileError, match=r"Kubernetes 1\.33 is not supported: .* need Kubernetes >= 1\.34"
    ):
        dra_cel.parse_kubernetes_version("1.33.4")


def test_allocator_features_by_version():
    assert features.for_version("1.35") == features.for_version(V(1, 35, 3)) == features.for_version("1.35.3-gke.1")
    assert features.for_version("1.35").device_taints is False
    assert features.for_version("1.36").device_taints is True
    assert features.for_version(None) == features.for_version("latest") == features.ALL
    assert features.for_version("1.35").missing("device_taints", "tolerations") == (
        "tolerations needs the DRADeviceTaints feature, on by default from Kubernetes 1.36"
    )


def test_placement_keys_by_minor_release():
    assert placement._minor("1.34.1-gke.1431000") == "1.34"
    assert placement._minor("1.36") == "1.36"
    assert placement._minor(None) is None


def test_providers_compare_minor_releases():
    assert gke._minor("1.34.5-gke.1") == V(1, 34) < gke._minor("1.35")
    assert eks._minor("1.35") == eks._minor("1.35.2") == V(1, 35)
    for minor in (gke._minor, eks._minor):
        with pytest.raises(GpufleetError, match=r"not a Kubernetes version: 'latest'"):
            minor("latest")
