"""Issue 33: ``autoscaling.kind: hpa``: a Kubernetes autoscaling/v2 HorizontalPodAutoscaler per replica workload (the
alternative to KEDA), on the engine's metric as a Pods metric the Prometheus adapter serves; schema-valid against
Kubernetes 1.34-1.37, bounds summing to the fleet's."""

from __future__ import annotations

from typing import Any

import k8s_schemas
import pytest
from render_case import deployment, replica

from ansible_collections.gpufleet.serving.plugins.module_utils import autoscaling
from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.deploy import fleet_manifests
from ansible_collections.gpufleet.serving.plugins.module_utils.models import ModelDeployment, parse

PATH = "gpufleet_model_deployments[0]"


def autoscaled(**scaling: Any) -> dict[str, Any]:
    dep = {k: v for k, v in deployment().items() if k != "replicas"}  # autoscaling says how many are placed
    dep["autoscaling"] = {"kind": "hpa", "min_replicas": 3, "max_replicas": 10, **scaling}
    dep["autoscaling"].setdefault("metric", {"kind": "queue_depth", "target": 4})
    return dep


def render(dep: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    fleet = {"name": "prod", "clusters": [{"name": "c1"}, {"name": "c2"}], "deployments": [dep], "caches": []}
    return fleet_manifests(fleet, [replica(dep, "c1", 0), replica(dep, "c1", 1), replica(dep, "c2", 2)])


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def test_hpa_renders_schema_valid_autoscalers_on_the_engines_pods_metric_whose_bounds_sum_to_the_fleets():
    out = render(autoscaled())
    hpas = of_kind(out["c1"], "HorizontalPodAutoscaler") + of_kind(out["c2"], "HorizontalPodAutoscaler")
    assert len(hpas) == 3 and not of_kind(out["c1"] + out["c2"], "ScaledObject")
    assert sum(h["spec"]["minReplicas"] for h in hpas) == 3
    assert sum(h["spec"]["maxReplicas"] for h in hpas) == 10
    workloads = {w["metadata"]["name"]: w for c in ("c1", "c2") for w in of_kind(out[c], "Deployment")}
    for hpa in hpas:
        assert hpa["apiVersion"] == "autoscaling/v2"
        target = hpa["spec"]["scaleTargetRef"]
        assert (target["apiVersion"], target["kind"]) == ("apps/v1", "Deployment")
        assert hpa["metadata"]["name"] == target["name"] and "replicas" not in workloads[target["name"]]["spec"]
        assert hpa["spec"]["metrics"] == [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "vllm:num_requests_waiting"},
                    "target": {"type": "AverageValue", "averageValue": "4"},
                },
            }
        ]
    k8s_schemas.validate_objects(out["c1"] + out["c2"])  # Kubernetes 1.34, 1.35, 1.36 and 1.37


def test_hpa_on_kv_cache_takes_a_fractional_target_and_keeps_one_pod_per_workload():
    out = render(autoscaled(min_replicas=1, max_replicas=4, metric={"kind": "kv_cache", "target": 0.75}))
    hpas = of_kind(out["c1"], "HorizontalPodAutoscaler") + of_kind(out["c2"], "HorizontalPodAutoscaler")
    assert {h["spec"]["metrics"][0]["pods"]["metric"]["name"] for h in hpas} == {"vllm:kv_cache_usage_perc"}
    assert {h["spec"]["metrics"][0]["pods"]["target"]["averageValue"] for h in hpas} == {"0.75"}
    # An HPA cannot hold a workload at zero: the replica workloads whose share of min_replicas is 0 keep one pod.
    assert sorted(h["spec"]["minReplicas"] for h in hpas) == [1, 1, 1]
    assert sum(h["spec"]["maxReplicas"] for h in hpas) == 4
    k8s_schemas.validate_objects(out["c1"] + out["c2"])


@pytest.mark.parametrize(
    ("scaling", "message"),
    [
        ({"min_replicas": 0}, r"autoscaling: min_replicas 0 \(scale to zero\) needs kind keda"),
        (
            {"metric": {"kind": "custom", "target": 1, "query": "sum(x)"}},
            r"autoscaling: a PromQL query .* needs kind keda",
        ),
        (
            {"metric": {"kind": "rps", "target": 1, "query": "sum(x)"}},
            r"autoscaling: a PromQL query .* needs kind keda",
        ),
        ({"kind": "vpa"}, r"autoscaling\.kind: must be one of keda, hpa \(got 'vpa'"),
    ],
)
def test_what_an_hpa_cannot_do_is_refused_naming_the_field(scaling, message):
    with pytest.raises(FleetValidationError, match=message):
        parse(ModelDeployment, autoscaled(**scaling), PATH)


def test_keda_stays_the_default():
    dep = autoscaled()
    del dep["autoscaling"]["kind"]
    out = render(dep)
    assert len(of_kind(out["c1"] + out["c2"], "ScaledObject")) == 3
    assert not of_kind(out["c1"] + out["c2"], "HorizontalPodAutoscaler")
    assert autoscaling.HPA_METRICS.keys() == autoscaling.METRIC_QUERIES.keys()  # every built-in kind has a name
