"""The shape of the code: no import cycle, no import hidden in a function, no module too long to read,
every module on the map of docs/architecture.md,
and folders that import downwards only, in the layers docs/architecture.md lists.

Read from the source with `ast`, so an import inside a function counts as much as one at
the top; imports under `if TYPE_CHECKING:` do not run, and do not count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.builders import REPO

APPS = ("benchviewer", "core", "trials", "comparisons", "shares")
MAX_LINES = 450  # a module read in one sitting (migrations aside)

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


def has_folders(app: str) -> bool:
    """An app made of folders (trials), not of modules alone (comparisons, core); migrations aside."""
    return any(
        path.is_dir() and (path / "__init__.py").exists()
        for path in (REPO / app).iterdir()
        if path.name != "migrations"
    )


def folder_of(module: str) -> str | None:
    """The folder-level unit of a module: a folder of an app (trials.models), a module lying directly
    in an app of folders (trials.tasks), or an app of modules alone (comparisons). None for the
    package file of an app of folders (trials/__init__.py), which only marks the package."""
    app, *rest = module.split(".")
    if not has_folders(app):
        return app
    return f"{app}.{rest[0]}" if rest else None


def folder_graph(graph: dict[str, set[str]]) -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """Folder -> folders it imports, from the module graph; and, per edge, one module import that makes it."""
    folders: dict[str, set[str]] = {}
    witness: dict[tuple[str, str], str] = {}
    for module, targets in sorted(graph.items()):
        source = folder_of(module)
        if source is None:
            continue
        folders.setdefault(source, set())
        for target in sorted(targets):
            folder = folder_of(target)
            if folder is not None and folder != source:
                folders[source].add(folder)
                folders.setdefault(folder, set())
                witness.setdefault((source, folder), f"{module} imports {target}")
    return folders, witness


def packages() -> list[str]:
    """Every folder of the apps with an `__init__.py`, at any depth (trials, trials.ingest, trials.ingest.formats)."""
    return sorted(name for name, path in app_modules().items() if path.name == "__init__.py")


def within_graph(graph: dict[str, set[str]], package: str) -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """The units one level inside `package` (its modules and subfolders: trials.ingest.records,
    trials.ingest.formats) -> those they import, from the module graph; and, per edge, one import that makes it."""
    prefix = f"{package}."

    def unit(module: str) -> str | None:
        return prefix + module[len(prefix) :].split(".")[0] if module.startswith(prefix) else None

    units: dict[str, set[str]] = {}
    witness: dict[tuple[str, str], str] = {}
    for module, targets in sorted(graph.items()):
        if (source := unit(module)) is None:
            continue
        units.setdefault(source, set())
        for target in sorted(targets):
            if (inside := unit(target)) is not None and inside != source:
                units[source].add(inside)
                units.setdefault(inside, set())
                witness.setdefault((source, inside), f"{module} imports {target}")
    return units, witness


def named_cycles(graph: dict[str, set[str]], witness: dict[tuple[str, str], str]) -> list[str]:
    """Each cycle of `graph`, with the imports that make it."""
    return [
        " <-> ".join(cycle) + "".join(f"\n  {witness[a, b]}" for a in cycle for b in cycle if (a, b) in witness)
        for cycle in cycles(graph)
    ]


def documented_layers() -> dict[str, int]:
    """Folder -> its layer (1 at the bottom), from the numbered list under "## Layers" in docs/architecture.md."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    layers = {}
    items = re.findall(r"^(\d+)\. (.*?)(?=^\d+\. |^$|\Z)", section, re.MULTILINE | re.DOTALL)  # up to a blank line
    for number, item in items:
        for path in re.findall(r"`([a-z_/]+(?:\.py|/))`", item):
            layers[path.removesuffix("/").removesuffix(".py").replace("/", ".")] = int(number)
    return layers


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


def test_no_folder_of_the_apps_is_part_of_an_import_cycle():
    named = named_cycles(*folder_graph(import_graph()[0]))
    assert not named, "folders in an import cycle:\n" + "\n".join(named)


def test_no_folder_inside_a_folder_is_part_of_an_import_cycle_with_its_neighbours():
    # One level down, in every folder: trials/ingest/formats/ against the modules of trials/ingest/ beside it.
    graph = import_graph()[0]
    named = [cycle for package in packages() for cycle in named_cycles(*within_graph(graph, package))]
    assert not named, "folders in an import cycle with their neighbours:\n" + "\n".join(named)


def test_every_folder_imports_only_its_own_layer_or_those_below_as_docs_architecture_lists():
    folders, witness = folder_graph(import_graph()[0])
    layers = documented_layers()
    assert sorted(set(folders) - set(layers)) == [], "folders missing from the layers of docs/architecture.md"
    assert sorted(set(layers) - set(folders)) == [], "docs/architecture.md lists layers for folders that do not exist"
    upward = [
        f"{source} (layer {layers[source]}) -> {target} (layer {layers[target]}): {witness[source, target]}"
        for source, targets in sorted(folders.items())
        for target in sorted(targets)
        if layers[target] > layers[source]
    ]
    assert upward == []


def test_the_folder_check_finds_a_cycle_that_no_module_is_part_of():
    # models.a -> storage.b -> models.c: no module cycle, but the two folders import each other.
    graph = {"trials.models.a": {"trials.storage.b"}, "trials.storage.b": {"trials.models.c"}, "trials.models.c": set()}
    assert cycles(graph) == []
    folders, witness = folder_graph(graph)
    assert cycles(folders) == [["trials.models", "trials.storage"]]
    assert witness["trials.storage", "trials.models"] == "trials.storage.b imports trials.models.c"


def test_the_check_one_level_down_finds_a_cycle_no_first_level_folder_is_part_of():
    # ingest.a -> ingest.formats.b, ingest.formats.c -> ingest.a: no module cycle, trials.ingest alone at the
    # first level, but ingest/formats/ and ingest/a.py import each other.
    graph = {
        "trials.ingest.a": {"trials.ingest.formats.b"},
        "trials.ingest.formats.b": set(),
        "trials.ingest.formats.c": {"trials.ingest.a"},
    }
    assert cycles(graph) == [] and cycles(folder_graph(graph)[0]) == []
    units, witness = within_graph(graph, "trials.ingest")
    assert named_cycles(units, witness) == [
        "trials.ingest.a <-> trials.ingest.formats"
        "\n  trials.ingest.a imports trials.ingest.formats.b"
        "\n  trials.ingest.formats.c imports trials.ingest.a"
    ]
    assert cycles(within_graph(graph, "trials.ingest.formats")[0]) == []


def test_the_cycle_check_finds_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


# An import a first page must not pay for, loaded on its first use instead (docs/architecture.md).
LOADED_ON_FIRST_USE = {"benchviewer/urls.py in mcp_view()"}  # the MCP SDK: a second of every first page


def test_no_import_statement_runs_inside_a_function_but_an_app_configs_ready():
    _, in_functions = import_graph()
    assert [f for f in in_functions if re.sub(r":\d+ in ", " in ", f) not in LOADED_ON_FIRST_USE] == []


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


def mapped_paths() -> set[str]:
    """Every repository path the map of docs/architecture.md names in backticks."""
    text = (REPO / "docs" / "architecture.md").read_text()
    return set(re.findall(r"`((?:[a-z_-]+/)+[A-Za-z_.-]*)`", text))


def test_every_module_of_the_apps_is_on_the_architecture_map_and_every_path_on_it_exists():
    modules = {str(path.relative_to(REPO)) for path in app_modules().values() if path.name != "__init__.py"}
    mapped = mapped_paths()
    assert sorted(modules - mapped) == [], "modules missing from docs/architecture.md: a line each"
    in_repo = {p for p in mapped if (REPO / p.split("/")[0]).exists()}  # not a pack's `verifier/`
    assert sorted(p for p in in_repo if not (REPO / p).exists()) == [], "paths on the map that do not exist"


def test_the_map_check_reads_paths_and_folders_but_not_code_in_backticks():
    names = re.findall(
        r"`((?:[a-z_-]+/)+[A-Za-z_.-]*)`", "`trials/viewer/pages.py`, `templates/`, `Trial.objects`, `a/b c`"
    )
    assert names == ["trials/viewer/pages.py", "templates/"]


def test_no_test_module_imports_another_test_module():
    """Shared test code lives in helper modules (tests/builders.py, a folder's *_helpers.py): importing a
    test module runs its collection twice and ties one file's tests to another's."""
    found = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(REPO)}: {n}" for n in names if n.rsplit(".", 1)[-1].startswith("test_")]
    assert found == []


def test_every_test_folder_is_named_after_the_code_folder_it_tests():
    """tests/<name>/ holds the tests of a code folder called <name> (an app, a folder inside one,
    or bench/), so a module's tests are found by its folder's name."""
    code_folders = {"bench"} | {
        path.name for app in APPS for path in [REPO / app, *(REPO / app).rglob("*")] if (path / "__init__.py").is_file()
    }
    test_folders = {path.parent.name for path in (REPO / "tests").glob("*/__init__.py")}
    assert sorted(test_folders - code_folders) == [], "test folders named after no code folder"
