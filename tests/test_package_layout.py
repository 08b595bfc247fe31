"""The package's shape, read from its source with ``ast``: no import circle, no private name imported
from another module, a short list of modules directly in ``roofline/``, every subpackage saying what
its family shares, and a test folder mirroring each subpackage."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "roofline"
TESTS = Path(__file__).resolve().parent
# the faces of the package: what a user or a rule names directly
TOP_LEVEL_MAX = 12


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, a package's name for its ``__init__.py``."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str]]:
    """(module imported, name taken from it or "") for every roofline import of the file, at any depth
    (an import inside a function is an edge too: it runs whenever the function does)."""
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names if alias.name.split(".")[0] == "roofline"]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from the file's own package
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([module] if module else [])])
            if module.split(".")[0] != "roofline":
                continue
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                found.append((submodule, "") if submodule in modules else (module, alias.name))
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = _modules(package)
    return {name: {target for target, _ in _imports(name, path, modules) if target in modules and target != name}
            for name, path in modules.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return circles


def test_the_circle_finder_finds_a_circle():
    """The check below can fail: a two- and a three-module circle beside a chain are found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c", "f"}, "f": set()}
    assert sorted(import_circles(graph)) == [["a", "b"], ["c", "d", "e"]]
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_circle():
    graph = import_graph()
    assert len(graph) > 80 and graph["roofline.stages.classify_app"]  # the graph was read
    assert import_circles(graph) == []


def test_no_private_name_is_imported_from_another_module():
    modules = _modules()
    private = [f"{name} imports {target}.{imported}" for name, path in modules.items()
               for target, imported in _imports(name, path, modules)
               if imported.startswith("_") and not imported.startswith("__") and target != name]
    assert private == [], "a private name used across modules means the cut is in the wrong place"


def test_few_modules_directly_in_the_package():
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_MAX, top


def test_every_subpackage_says_what_its_family_shares_and_has_a_test_folder():
    for init in sorted(PACKAGE.rglob("__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert docstring, f"{init.relative_to(PACKAGE.parent)} has no docstring"
        folder = init.parent.relative_to(PACKAGE)
        if folder.parts:  # a folder of tests, or one test file for a package read as one (a reader)
            mirror = TESTS / folder
            assert mirror.is_dir() or mirror.with_name(f"test_{folder.name}.py").is_file(), (
                f"tests/{folder.as_posix()}/ mirrors roofline/{folder.as_posix()}/")
