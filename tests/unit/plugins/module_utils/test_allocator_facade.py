"""``module_utils/allocator.py`` keeps the import path earlier releases published (issue 24 item 7): the allocator
lives in ``dra/allocator.py``, and the façade re-exports its public names -- the same objects, not copies."""

from __future__ import annotations

from ansible_collections.gpufleet.serving.plugins.module_utils import allocator as facade
from ansible_collections.gpufleet.serving.plugins.module_utils.dra import allocator


def test_the_facade_re_exports_the_allocators_public_names():
    assert facade.__all__, "the façade names nothing"
    for name in facade.__all__:
        assert getattr(facade, name) is getattr(allocator, name), name
    # Every public class and function the allocator defines (type aliases and constants are listed by hand).
    public = {
        n
        for n, v in vars(allocator).items()
        if not n.startswith("_") and getattr(v, "__module__", None) == allocator.__name__
    }
    assert public <= set(facade.__all__), f"not re-exported: {sorted(public - set(facade.__all__))}"


def test_code_written_against_the_old_path_still_allocates():
    from ansible_collections.gpufleet.serving.plugins.module_utils.allocator import allocate, node_devices
    from ansible_collections.gpufleet.serving.plugins.module_utils.models import InferenceClass, NodeSelector

    klass = InferenceClass.model_validate(
        {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "device_class_name": "gpu.nvidia.com", "count": 2}]}
    )
    ns = NodeSelector.model_validate({"devices": [{"name": "gpu", "count": 2}]})
    got = allocate(ns, node_devices(klass), lambda _expr, _dev: (True, None))
    assert got.ok and got.devices == (0, 1)
