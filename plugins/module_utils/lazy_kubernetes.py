# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Import the kubernetes package without its generated API and model classes until something uses one.

``import kubernetes`` imports every generated API class and model, about 1,070 modules: 0.3 s of the 0.6 s the package
takes to import, and the ansible-playbook process then carries them to its exit (more to collect there) and into
every worker it forks. The dynamic client the collection talks through sends and receives JSON and uses none of them.
Upstream asked for modular imports in kubernetes-client/python#771 (closed unresolved); this module does it from
outside, without changing what any caller sees:

- ``kubernetes.client``, ``kubernetes.client.api`` and ``kubernetes.client.models`` are registered as the real
  packages (their own directory, spec and loader), with their ``__init__`` not yet run;
- a name asked of one of them is, in this order: a submodule (``kubernetes.client.rest``), imported as usual; one of
  :data:`_DIRECT` (what the package's ``__init__`` would bind from a cheap submodule); anything else runs the
  package's real ``__init__`` once (thread-safe), after which the package is exactly what a plain import gives.

So ``kubernetes.client.CoreV1Api()`` or ``from kubernetes.client import V1Pod`` still work: the first such use pays
the cost the import used to. :func:`defer_generated_classes` does nothing when kubernetes is already imported, or when
the installed package is not laid out as expected (then the plain import happens as before).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from types import ModuleType
from typing import Any

# Packages whose __init__ imports generated classes, and names whose binding their __init__ takes from a cheap
# submodule (the only ones kubernetes.config, .dynamic, .watch and .stream ask for while importing).
_LAZY = ("kubernetes.client", "kubernetes.client.api", "kubernetes.client.models")
_DIRECT = {
    "kubernetes.client": {"ApiClient": "api_client", "Configuration": "configuration"},
}
_LOCK = threading.RLock()
_STARTED: set[str] = set()  # the packages whose __init__ has run or is running


def _lazy_package(name: str, directory: str) -> ModuleType | None:
    init = os.path.join(directory, "__init__.py")
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[directory])
    if spec is None or spec.loader is None or not os.path.isfile(init):
        return None
    module = importlib.util.module_from_spec(spec)  # the real package object, its __init__ not yet executed
    direct = _DIRECT.get(name, {})

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        if attr in direct:
            value = getattr(importlib.import_module(f"{name}.{direct[attr]}"), attr)
            setattr(module, attr, value)
            return value
        try:
            return importlib.import_module(f"{name}.{attr}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{name}.{attr}":
                raise
        _run_init(module)
        try:
            return vars(module)[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


def _run_init(module: ModuleType) -> None:
    """Run the package's own ``__init__`` once; from then on it is the package a plain import gives. Another thread
    asking meanwhile waits for it; the ``__init__`` itself asking for a name it has not bound yet gets an
    AttributeError, as in a package being imported."""
    with _LOCK:
        if module.__name__ in _STARTED:  # done, or running in this very thread
            return
        _STARTED.add(module.__name__)
        spec = module.__spec__
        if spec is None or spec.loader is None:  # made by _lazy_package, which always gives both
            raise ImportError(f"{module.__name__} has no loader")
        try:
            spec.loader.exec_module(module)
        except BaseException:
            _STARTED.discard(module.__name__)
            raise
        del module.__getattr__


def is_deferred(name: str) -> bool:
    """True while package ``name`` (one of :data:`_LAZY`) is imported without its ``__init__`` having run."""
    module = sys.modules.get(name)
    return module is not None and "__getattr__" in vars(module)


def defer_generated_classes() -> bool:
    """Register the lazy packages, then import ``kubernetes`` (its own ``__init__`` runs as usual). True when the
    generated classes are deferred; False when kubernetes was imported already or is not laid out as expected."""
    with _LOCK:
        if "kubernetes" in sys.modules or any(name in sys.modules for name in _LAZY):
            return False
        spec = importlib.util.find_spec("kubernetes")  # a top-level package: found, not imported
        if spec is None or not spec.submodule_search_locations:
            return False
        root = next(iter(spec.submodule_search_locations))
        packages = {name: _lazy_package(name, os.path.join(root, *name.split(".")[1:])) for name in _LAZY}
        if any(module is None for module in packages.values()):
            return False
        for name, module in packages.items():  # as the import system binds a loaded submodule on its parent
            parent, _dot, child = name.rpartition(".")
            if parent in packages:
                setattr(packages[parent], child, module)
        sys.modules.update(packages)  # type: ignore[arg-type]
        try:
            importlib.import_module("kubernetes")
        except BaseException:
            for name in _LAZY:
                sys.modules.pop(name, None)
            sys.modules.pop("kubernetes", None)
            raise
        return True
