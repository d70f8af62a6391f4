"""The live path writes no row itself: trials/live/ decides what to write, trials/imports/appends.py (the
importer's rows and steps) writes it (issue 40, "one writer"), through the one redaction stage, which nothing of
trials/live/ calls itself. Read from the source, as the structure test reads imports: a write or a redaction
import added to trials/live/ fails here, with its place."""

from __future__ import annotations

import ast
from pathlib import Path

LIVE = Path(__file__).resolve().parents[2] / "trials" / "live"
WRITE_METHODS = {"save", "create", "bulk_create", "update", "delete", "get_or_create", "update_or_create"}
WRITE_FUNCTIONS = {"insert_rows", "set_integers", "create_in_batches"}
# The OTLP request's body queue (like an Import row, not a trial's): kept by the request, deleted once read.
QUEUE = "ReceivedBatch"


def writes_in(path: Path) -> list[str]:
    source = path.read_text()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        is_write = (isinstance(func, ast.Attribute) and name in WRITE_METHODS) or name in WRITE_FUNCTIONS
        if is_write and QUEUE not in (ast.get_source_segment(source, node) or ""):
            found.append(f"{path.name}:{node.lineno}: {name}()")
    return found


def test_no_module_of_the_live_path_writes_a_row_itself():
    modules = sorted(LIVE.glob("*.py"))
    assert len(modules) > 5  # (the folder is where this test thinks it is)
    assert [write for path in modules for write in writes_in(path)] == []


def redaction_imports_in(path: Path) -> list[str]:
    """Each import of the redaction module (or of a name from it) in the module, with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "trials.ingest.redaction":
            found.append(f"{path.name}:{node.lineno}")
        elif isinstance(node, ast.ImportFrom) and node.module == "trials.ingest":
            found += [f"{path.name}:{node.lineno}" for alias in node.names if alias.name == "redaction"]
        elif isinstance(node, ast.Import):
            found += [f"{path.name}:{node.lineno}" for alias in node.names if alias.name == "trials.ingest.redaction"]
    return found


def test_no_module_of_the_live_path_withholds_redacted_values_itself():
    # (the writer runs the one redaction stage on what a request parsed: imports/appends.py)
    assert redaction_imports_in(LIVE.parent / "imports" / "appends.py")
    assert [found for path in sorted(LIVE.glob("*.py")) for found in redaction_imports_in(path)] == []
