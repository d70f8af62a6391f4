"""Issue 41, Must 1: the shapes the field writes today read the same through the upload API as from a file
(`manage.py import`): the same trials, statuses, rewards, steps, tokens and documents, and the same warnings
at the same JSON paths. Each input is a shared public run, or written by its producer (inspect_ai's own
chunked converter, opentelemetry-sdk's encoders), or the lenient ATIF file its test writes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from inspect_ai.log._recorders.chunked.convert import convert_eval_logs_to_chunked

from tests.builders import REFERENCE
from tests.imports.atif_helpers import lenient_file
from tests.imports.otlp_helpers import adk_run, otlp_file, tempo_body
from tests.inspect_logs import write_agentic_log
from trials.models import Document, Import, Job, Pack, Trial

pytestmark = pytest.mark.django_db

NATIVE = REFERENCE / "public-runs-1" / "harbor-rfc-native-logs"


def shared(path: Path) -> Callable[[Path], Path]:
    return lambda folder: path


def tempo(folder: Path) -> Path:
    spans, _ = adk_run()
    path = folder / "tempo-export.json"
    path.write_text(json.dumps(tempo_body(spans)))
    return path


def adk_with_logs(folder: Path) -> Path:
    return otlp_file(folder / "adk-trace.json", *adk_run())


def chunked_inspect(folder: Path) -> Path:
    whole = write_agentic_log(folder / "eval")
    convert_eval_logs_to_chunked(str(whole), str(folder / "chunked"), chunk_size=2)
    return next((folder / "chunked").glob("*.eval"))


def lenient_atif(folder: Path) -> Path:
    lenient_file(folder / "trajectory.json")
    return folder / "trajectory.json"


INPUTS = {
    "mini-swe-agent": shared(NATIVE / "mini-swe-agent-trajectory.json"),
    "gemini-cli": shared(NATIVE / "gemini-cli-trajectory.json"),
    "parity-experiment": shared(REFERENCE / "public-runs-1/harbor-adapters/swebenchpro/parity_experiment.json"),
    "otlp-tempo": tempo,
    "otlp-spans-and-logs": adk_with_logs,
    "inspect-chunked": chunked_inspect,
    "atif-lenient": lenient_atif,
}


def facts(imp: Import) -> dict:
    """What the pages read of an import: its outcome, its trials and documents, and what it warned of."""
    trials = Trial.objects.filter(pack__first_import=imp).order_by("name")
    return {
        "status": imp.status,
        "trials": [
            (t.name, t.source_format, t.status, t.reward, t.step_count, t.input_tokens, t.output_tokens) for t in trials
        ],
        "documents": sorted(Document.objects.filter(pack__first_import=imp).values_list("kind", "title")),
        "warnings": sorted(
            (Path(p["file"]).name, p["json_path"], p["message"])
            for p in imp.problems + [p for t in trials for p in t.problems]
        ),
    }


def forget_everything() -> None:
    for model in (Trial, Job, Document, Pack, Import):
        model.objects.all().delete()


@pytest.mark.parametrize("name", INPUTS)
def test_an_upload_reads_as_the_file_imported_by_the_cli(
    name, tmp_path, client_logged_in, django_capture_on_commit_callbacks
):
    path = INPUTS[name](tmp_path)
    call_command("import_packs", str(path), "--no-progress")
    by_file = facts(Import.objects.get())
    assert by_file["status"] == "done" and (by_file["trials"] or by_file["documents"]), by_file
    forget_everything()

    upload = SimpleUploadedFile(path.name, path.read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        response = client_logged_in.post("/api/imports/", {"file": upload})
    assert response.status_code == 202, response.content
    assert facts(Import.objects.get(pk=response.json()["id"])) == by_file
