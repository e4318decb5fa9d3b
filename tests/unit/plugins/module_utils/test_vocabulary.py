"""The fleet's device vocabulary (issue 25): a selector or request naming what no class publishes is an error."""

from __future__ import annotations

import pytest
from example_fleet import example_fleet
from module_utils_tests import builders

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError

fleet_dict = builders("fleet/test_fleet_deploy").fleet_dict


def first_request(data: dict) -> dict:
    return data["deployments"][0]["engines"][0]["members"][0]["node_selector"]["devices"][0]


@pytest.mark.parametrize(
    ("cel", "reason"),
    [
        (
            'device.capacity["nvidia.com"].memory.compareTo(quantity("16Gi")) >= 0',
            "capacity domain 'nvidia.com' is published by no inference class of the fleet (did you mean "
            "'gpu.nvidia.com'?",
        ),
        (
            'device.capacity["gpu.nvidia.com"].memry.compareTo(quantity("16Gi")) >= 0',
            "capacity gpu.nvidia.com/memry is published by no inference class of the fleet (did you mean 'memory'?",
        ),
        (
            'device.attributes["gpu.nvidia.com"]["productNme"] == "NVIDIA L4"',
            "attribute gpu.nvidia.com/productNme is published by no inference class of the fleet (did you mean "
            "'productName'?",
        ),
        (
            '"gpu.nvidia.com" in device.attributes && has(device.attributes["gpu.nvidia.comm"].productName)',
            "attribute domain 'gpu.nvidia.comm' is published by no inference class of the fleet",
        ),
    ],
)
def test_a_selector_naming_what_no_class_publishes_is_an_error(cel, reason):
    data = example_fleet()
    first_request(data)["selectors"] = [{"cel": cel}]
    with pytest.raises(FleetValidationError) as exc:
        fleet_dict(data)
    assert "node_selector.devices[0] (gpu).selectors[0].cel: " + reason in str(exc.value)


def test_a_mistyped_device_class_is_an_error_with_a_suggestion():
    data = example_fleet()
    first_request(data)["device_class_name"] = "gpu.nvida.com"
    with pytest.raises(FleetValidationError) as exc:
        fleet_dict(data)
    assert (
        "device_class_name: DeviceClass 'gpu.nvida.com' is requested by no device of the fleet's inference classes"
        in str(exc.value)
    )
    assert "did you mean 'gpu.nvidia.com'?" in str(exc.value)


def test_a_constraint_on_an_unpublished_attribute_is_an_error():
    data = example_fleet()
    member = data["deployments"][0]["engines"][0]["members"][0]
    member["node_selector"]["constraints"] = [{"match_attribute": "gpu.nvidia.com/pcieRut"}]
    with pytest.raises(
        FleetValidationError, match=r"constraints\[0\]\.match_attribute: attribute gpu.nvidia.com/pcieRut"
    ):
        fleet_dict(data)


def test_what_the_classes_publish_passes_and_computed_names_are_left_alone():
    data = example_fleet()
    first_request(data)["selectors"] = [
        {"cel": 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("16Gi")) >= 0'},
        {"cel": 'device.attributes["gpu." + "nvidia.com"].productName != ""'},  # not a literal: not judged
    ]
    fleet_dict(data)
