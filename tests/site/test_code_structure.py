"""The shape of the code: no import cycle, no import hidden in a function, no module too long to read.

Read from the source with `ast`, so an import inside a function counts as much as one at
the top; imports under `if TYPE_CHECKING:` do not run, and do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.builders import REPO

APPS = ("benchviewer", "core", "trials", "comparisons")
MAX_LINES = 600  # a module read in one sitting (migrations aside)

pytestmark = pytest.mark.sqlite_only("no database: reads the source files")


def app_modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the apps but their migrations."""
    modules = {}
    for app in APPS:
        for path in sorted((REPO / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def runtime_imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, ast.AST | None]]:
    """Every import statement that runs, with the function it sits in (None at module level)."""
    found: list[tuple[ast.Import | ast.ImportFrom, ast.AST | None]] = []

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child, function)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, function))
        inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, None)
    return found


def imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement may load: the module, and each name as a submodule."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def import_graph() -> tuple[dict[str, set[str]], list[str]]:
    """Module -> project modules it imports; and the imports found inside functions."""
    modules = app_modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    in_functions = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for node, function in runtime_imports(tree):
            if function is not None and not (isinstance(function, ast.FunctionDef) and function.name == "ready"):
                in_functions.append(f"{path.relative_to(REPO)}:{node.lineno} in {function.name}()")  # type: ignore[attr-defined]
            for target in imported_names(node, name, path.name == "__init__.py"):
                found = owner(target)
                if found and found != name:
                    graph[name].add(found)
    return graph, in_functions


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_no_module_of_the_apps_is_part_of_an_import_cycle():
    graph, _ = import_graph()
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_statement_runs_inside_a_function_but_an_app_configs_ready():
    _, in_functions = import_graph()
    assert in_functions == []


def test_an_import_in_a_function_is_found_and_one_under_type_checking_is_not():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from trials.models import Blob\n"
        "def f():\n    from trials import search\n"
    )
    found = [(ast.unparse(node), getattr(function, "name", None)) for node, function in runtime_imports(tree)]
    assert found == [("from typing import TYPE_CHECKING", None), ("from trials import search", "f")]


def test_every_module_of_the_apps_can_be_read_in_one_sitting():
    lengths = {name: len(path.read_text().splitlines()) for name, path in app_modules().items()}
    assert {name: lines for name, lines in lengths.items() if lines > MAX_LINES} == {}
