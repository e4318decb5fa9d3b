"""The import graph of plugins/: no cycle, imports inside functions included (AnsiballZ follows those too).

Each file's imports of the collection are read with ``ast`` over the whole tree: module level, functions, ``if``
blocks, ``if TYPE_CHECKING:`` blocks too (AnsiballZ follows every one). ``from pkg import name`` counts as an import
of ``pkg.name`` when that is a module, else of ``pkg``. A strongly connected component of more than one module is a
cycle. (Importing a module also runs its packages' ``__init__.py``: the package ``__init__`` files under module_utils
are empty, which a test below keeps so, so those implicit imports can close no cycle.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PLUGINS = REPO / "plugins"
PACKAGE = "ansible_collections.gpufleet.serving"
MODULE_UTILS = f"{PACKAGE}.plugins.module_utils"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def collection_files() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PLUGINS.rglob("*.py"))}


def imports_of(source: str, name: str, modules: set[str], is_package: bool = False) -> set[str]:
    """The collection modules ``source`` (module ``name``) imports, anywhere in the file: ``import x.y`` and
    ``from x import y`` name ``x.y`` when that is a module, else ``x``."""
    package = name if is_package else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from ..y import z
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                named.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target)
    return {target for target in named if target in modules and target != name}


def import_graph() -> dict[str, set[str]]:
    files = collection_files()
    names = set(files)
    return {
        name: imports_of(path.read_text(), name, names, is_package=path.name == "__init__.py")
        for name, path in files.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node (and nodes with an edge to themselves), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def short(name: str) -> str:
    return name.removeprefix(PACKAGE + ".")


# --------------------------------------------------------------------------------------------------------------------
# The checker itself
# --------------------------------------------------------------------------------------------------------------------


def test_the_cycle_finder_finds_cycles_and_only_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}) == [["a", "b"], ["c", "d"]]


def test_imports_inside_functions_and_from_imports_of_modules_count():
    modules = {
        f"{MODULE_UTILS}.contract",
        f"{MODULE_UTILS}.errors",
        f"{MODULE_UTILS}.backends",
        f"{MODULE_UTILS}.backends.registry",
        f"{MODULE_UTILS}.backends.base",
    }
    source = (
        "from __future__ import annotations\n"
        f"from {MODULE_UTILS}.errors import GpufleetError\n"
        "def role_contract():\n"
        "    if True:\n"
        f"        from {MODULE_UTILS}.backends import registry\n"
        "    return registry\n"
    )
    assert imports_of(source, f"{MODULE_UTILS}.contract", modules) == {
        f"{MODULE_UTILS}.errors",
        f"{MODULE_UTILS}.backends.registry",
    }
    relative = "from . import base\nfrom .. import errors\n"
    assert imports_of(relative, f"{MODULE_UTILS}.backends.registry", modules) == {
        f"{MODULE_UTILS}.backends.base",
        f"{MODULE_UTILS}.errors",
    }


def test_the_lazy_import_that_closed_a_cycle_is_found():
    """contract.role_contract() used to import the backend registry inside the function: contract -> backends ->
    backends.deployment -> contract (the backends are render/backends/ now). The graph sees it."""
    names = set(collection_files())
    graph = import_graph()
    graph[f"{MODULE_UTILS}.contract"] = graph[f"{MODULE_UTILS}.contract"] | imports_of(
        f"def role_contract():\n    from {MODULE_UTILS}.render.backends.registry import serving_kinds\n",
        f"{MODULE_UTILS}.contract",
        names,
    )
    assert any(f"{MODULE_UTILS}.contract" in cycle for cycle in cycles(graph))


# --------------------------------------------------------------------------------------------------------------------
# The collection
# --------------------------------------------------------------------------------------------------------------------


def test_no_import_cycle_in_plugins():
    found = cycles(import_graph())
    assert found == [], "import cycles in plugins/:\n" + "\n".join(" -> ".join(map(short, c)) for c in found)


def test_the_walk_sees_the_collection():
    graph = import_graph()
    assert f"{PACKAGE}.plugins.modules.replica_placement" in graph
    assert f"{MODULE_UTILS}.placement" in graph[f"{PACKAGE}.plugins.modules.replica_placement"]
    assert f"{MODULE_UTILS}.render.backends.registry" in graph[f"{PACKAGE}.plugins.plugin_utils.contract"]


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        # The contract sits at the bottom: only the error spine (which imports nothing).
        ("contract", {"errors"}),
        ("errors", set()),
        ("k8s.version", set()),
        # The CEL engine's bottom: the syntax tree and the types import nothing of the collection.
        ("cel.nodes", set()),
        ("cel.types", set()),
        ("cel.common", {"errors"}),
        # The cloud seam: the Provider protocol and the shared waiter stand on the capacity failures alone.
        ("cloud.provider", {"capacity_ladder", "errors", "k8s.version"}),
        # The plan document is pure data over the contract; the placement artifacts are pure functions over dicts.
        ("plan.document", {"contract", "errors"}),
        ("plan.artifacts", set()),
        # The replica record stands on the models (and the DRA shapes they validate with), never on a stage after it.
        ("plan.records", {"contract", "dra.api", "errors", "models"}),
        # GitOps render imports only the contract, so the render-directory writer (manifest_dir.py) stays light.
        ("render.gitops", {"contract", "errors"}),
        ("render.containers", set()),
    ],
)
def test_bottom_modules_import_only_what_they_may(module, allowed):
    graph = import_graph()
    imported = {n.removeprefix(MODULE_UTILS + ".") for n in graph[f"{MODULE_UTILS}.{module}"]}
    assert imported <= allowed, f"{module} imports {sorted(imported - allowed)}"


def test_module_utils_package_inits_are_empty():
    """kubernetes.core and amazon.aws keep them empty; AnsiballZ ships every package __init__ on the way to a file."""
    inits = sorted((PLUGINS / "module_utils").rglob("__init__.py"))
    assert inits, "no package under plugins/module_utils"
    assert {str(p.relative_to(REPO)): p.read_bytes() for p in inits if p.read_bytes().strip()} == {}


def test_cel_function_library_does_not_import_the_engine():
    """The checker, coster and interpreter read the function registry; a library file never reads them back."""
    graph = import_graph()
    engine = {f"{MODULE_UTILS}.cel.{name}" for name in ("checker", "cost", "interpreter", "selector")}
    library = sorted(name for name in graph if name.startswith(f"{MODULE_UTILS}.cel.library."))
    assert len(library) >= 10, library
    assert {name: sorted(graph[name] & engine) for name in library if graph[name] & engine} == {}


def test_one_cloud_provider_does_not_import_another():
    """A GKE module's payload carries nothing of EKS and the other way round."""
    graph = import_graph()
    gke, eks = f"{MODULE_UTILS}.cloud.gke", f"{MODULE_UTILS}.cloud.eks"
    assert f"{MODULE_UTILS}.cloud.provider" in graph[gke] & graph[eks]
    assert eks not in graph[gke] and gke not in graph[eks]
    assert f"{MODULE_UTILS}.cloud.gke_client" not in graph[gke]  # the client is the module's, passed in


def _closure(graph: dict[str, set[str]], name: str) -> set[str]:
    seen: set[str] = set()
    todo = [name]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_stages_import_downstream_only():
    """inventory -> models -> plan -> render -> write/apply: placement (placement.py, scheduling/) and the plan's
    replica records, document and artifacts reach nothing of render/ (the replica_placement module ships none of it);
    no module of render/ imports the fleet orchestration (fleet/) or the write/apply stage."""
    graph = import_graph()
    render = f"{MODULE_UTILS}.render."
    upstream = [f"{MODULE_UTILS}.placement", f"{MODULE_UTILS}.plan.document", f"{MODULE_UTILS}.plan.records"]
    upstream += [f"{MODULE_UTILS}.plan.artifacts"]
    upstream += sorted(name for name in graph if name.startswith(f"{MODULE_UTILS}.scheduling."))
    assert {
        short(name): sorted(short(n) for n in _closure(graph, name) if n.startswith(render)) for name in upstream
    } == {short(name): [] for name in upstream}
    later = {f"{MODULE_UTILS}.{name}" for name in ("manifest_dir", "rollout", "plan.files")}
    # fleet/: the fleet as one unit at run time (deploy, reconcile, state, view, html) is downstream of render/; its
    # inventory module (the fleet read and validated from the inventory) is upstream of it all and imports none of it.
    fleet_inventory = f"{MODULE_UTILS}.fleet.inventory"
    later |= {name for name in graph if name.startswith(f"{MODULE_UTILS}.fleet.") and name != fleet_inventory}
    assert {f"{MODULE_UTILS}.fleet.{name}" for name in ("deploy", "reconcile", "state", "view", "html")} <= later
    assert sorted(map(short, _closure(graph, fleet_inventory) & later)) == []
    in_render = sorted(name for name in graph if name.startswith(render))
    assert len(in_render) >= 12, in_render  # serving, gitops, pd, caches, containers, ..., backends/*
    assert {short(name): sorted(map(short, graph[name] & later)) for name in in_render if graph[name] & later} == {}
