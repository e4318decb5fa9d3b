"""The CEL function registry (plugins/module_utils/cel/library/): one record a function, read by the checker, the
coster and the interpreter; and the dra_cel.py façade over the cel/ package."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils import dra_cel
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library import registry
from ansible_collections.gpufleet.serving.plugins.module_utils.cel.library.function import Arrival, Function

CEL = Path(registry.__file__).resolve().parents[1]


def test_every_declared_function_has_a_runtime_and_the_tables_follow_the_records():
    assert set(registry.DECLS) <= set(registry.RUNTIME)
    for name, record in registry.FUNCTIONS.items():
        assert record.library, name
        assert registry.DECLS.get(name, []) == list(record.overloads)
        assert registry.RUNTIME.get(name) is record.runtime
        assert registry.RUNTIME_COSTS.get(name) is record.runtime_cost
        assert (name in registry.GROWTH) == record.growth
    # the checker types these two itself: no declared overload, still a runtime
    assert "type" in registry.RUNTIME and "type" not in registry.DECLS
    assert "_?._" in registry.RUNTIME and "_?._" not in registry.DECLS


def test_a_function_is_declared_once():
    with pytest.raises(ValueError, match="'replace' is declared twice"):
        registry.register(registry.FUNCTIONS["replace"])


@pytest.mark.parametrize(
    ("name", "version", "available"),
    [
        ("includes", (1, 37), False),  # behind DRAListTypeAttributes, off by default
        ("includes", None, True),
        ("mul", (1, 36), False),
        ("allowMultipleAllocations", (1, 35), False),
        ("allowMultipleAllocations", (1, 36), True),
        ("replace", (1, 34), True),
        ("sort", None, False),  # cel-go ext.Lists: not implemented
    ],
)
def test_availability_comes_from_the_records(name, version, available):
    assert (registry.unavailable(name, version) == "") is available


def test_gated_functions_name_their_feature_gate():
    assert registry.FUNCTIONS["includes"].arrival.gate == "DRAListTypeAttributes"
    assert registry.FIELD_ARRIVALS["allowMultipleAllocations"].gate == "DRAConsumableCapacity"


@pytest.fixture
def shout():
    """A new member function, string.shout(), as one record: overloads, runtime, both cost hooks, growth, arrival."""
    record = Function(
        "shout",
        "test",
        [(True, "string", "string")],
        lambda s: s.upper() + "!",
        estimate=lambda coster, node, overload: ((7, 7), None),
        runtime_cost=lambda args: 5,
        growth=True,
        arrival=Arrival((1, 36), "a test function"),
    )
    registry.register(record)
    try:
        yield record
    finally:
        for table in (registry.FUNCTIONS, registry.DECLS, registry.RUNTIME, registry.RUNTIME_COSTS):
            table.pop("shout", None)
        registry.GROWTH.discard("shout")


def test_one_record_is_all_a_new_function_needs(shout):
    sel = dra_cel._compile('"gpu".shout()', require_bool=False)
    assert sel.output_type == "string"  # the checker read the overload
    assert sel.max_cost == 7  # the coster read the estimate (a constant target costs nothing)
    assert sel.cost_tracked  # growth: evaluated with cost tracking
    assert sel.evaluate_with_cost({}) == ("GPU!", 5)  # the interpreter ran the runtime and charged its cost
    with pytest.raises(dra_cel.SelectorCompileError, match="found no matching overload for 'shout' applied to 'int"):
        dra_cel._compile("1.shout() == 'x'")
    with pytest.raises(
        dra_cel.SelectorCompileError,
        match=r"'shout' is not available in Kubernetes 1\.35; it arrived in Kubernetes 1\.36 \(a test function\)",
    ):
        dra_cel._compile('"gpu".shout() == "GPU!"', version=(1, 35))
    assert dra_cel._compile('"gpu".shout() == "GPU!"', version=(1, 36)).matches({})


def test_the_facade_keeps_the_names_other_code_uses():
    # plugins/ and tests/ reach these through dra_cel (vocabulary.py walks parsed selectors; fleet_info, placement)
    for name in (
        "COST_LIMIT", "MAX_EXPRESSION_BYTES", "Call", "CelSyntaxError", "CompiledSelector", "Const", "GpufleetError",
        "HAS_RE2", "Ident", "Index", "Node", "Select", "SelectorCompileError", "SelectorEvalError", "compile_selector",
        "device_to_cel", "parse", "parse_kubernetes_version", "_compile", "_find", "_find_all", "_matches",
    ):  # fmt: skip
        assert hasattr(dra_cel, name), name
    assert dra_cel.__all__ == [
        "COST_LIMIT",
        "MAX_EXPRESSION_BYTES",
        "CompiledSelector",
        "SelectorCompileError",
        "SelectorEvalError",
        "compile_selector",
        "device_to_cel",
    ]
    assert dra_cel._RUNTIME is registry.RUNTIME  # a test may patch a runtime through the façade
    assert isinstance(dra_cel.parse("device.driver == 'x'"), dra_cel.Call)


def test_no_cel_file_is_over_1500_lines():
    sizes = {str(p.relative_to(CEL)): len(p.read_text().splitlines()) for p in CEL.rglob("*.py")}
    assert len(sizes) > 20
    assert {name: n for name, n in sizes.items() if n > 1500} == {}
    assert len((CEL.parent / "dra_cel.py").read_text().splitlines()) < 200
