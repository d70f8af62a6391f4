"""Every sample pack in ../shared/reference imports, and nothing in it is lost."""

from __future__ import annotations

import hashlib
import html

import orjson
import pytest
from jsonschema import Draft202012Validator

from tests.builders import ATIF_SCHEMA, REFERENCE, import_path
from trials.models import (
    Blob,
    Document,
    ObservationResult,
    PackFile,
    RuntimeEvent,
    Step,
    ToolCall,
    Trajectory,
    Trial,
)

pytestmark = pytest.mark.django_db

DATA_FILES = sorted(p for p in REFERENCE.rglob("*") if p.is_file() and p.name != "README.md")
ATIF_FILES = sorted((REFERENCE / "harbor" / "atif").rglob("*.json"))
# The files that make a folder one run of a multi-file format: a Harbor job or trial, a TB1 run or
# trial, an AgentV run (its summary, its index). A file below such a folder is part of that run.
RUN_MARKERS = ("result.json", "results.json", "run_metadata.json", "summary.json", "index.jsonl")


def run_folder_of(path):
    """The outermost folder below the reference's source folders that holds a run marker, else the file.

    `reference/<source>/<pack>/…`: a run's files (a trial's verifier output, a TB1 run's tb.lock, an
    AgentV sample's grading.json) are imported as that run, as a user would upload them."""
    folders = [p for p in path.parents if REFERENCE in p.parents and p.parent != REFERENCE]
    runs = [p for p in folders if any((p / marker).is_file() for marker in RUN_MARKERS)]
    return runs[-1] if runs else path


LONE_FILES = [p for p in DATA_FILES if run_folder_of(p) == p]


@pytest.fixture
def imported_reference():
    imp = import_path(REFERENCE)
    assert imp.status == "done", imp.problems
    return imp


def test_the_whole_reference_folder_imports_with_no_rejected_pack(imported_reference):
    outcomes = imported_reference.outcomes
    assert [o for o in outcomes if o["outcome"] == "rejected"] == []
    skipped = {o["pack"].rsplit("/", 1)[-1] for o in outcomes if o["outcome"] == "skipped"}
    assert skipped == {"README.md"}


def test_every_reference_file_is_stored_byte_for_byte(imported_reference):
    stored = {path.split("/", 1)[1]: blob_id for path, blob_id in PackFile.objects.values_list("path", "blob_id")}
    for path in DATA_FILES:
        rel = path.relative_to(REFERENCE).as_posix()
        assert rel in stored, f"{rel} has no stored copy"
        blob = Blob.objects.get(pk=stored[rel])
        assert blob.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert blob.read() == path.read_bytes()


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda p: p.relative_to(REFERENCE).as_posix())
def test_each_reference_file_imports_on_its_own_or_as_the_run_it_is_part_of(path):
    imp = import_path(run_folder_of(path))
    assert imp.status == "done"
    assert [o["outcome"] for o in imp.outcomes] == ["imported"], imp.outcomes


@pytest.mark.parametrize("path", ATIF_FILES, ids=lambda p: p.name)
def test_atif_step_tool_call_and_observation_counts_match_the_file(path):
    import_path(path)
    data = orjson.loads(path.read_bytes())
    trajectory = Trajectory.objects.get()
    assert trajectory.step_count == len(data["steps"]) == Step.objects.count()
    expected_calls = sum(len(s.get("tool_calls") or []) for s in data["steps"])
    expected_results = sum(len((s.get("observation") or {}).get("results") or []) for s in data["steps"])
    assert ToolCall.objects.count() == expected_calls
    assert ObservationResult.objects.count() == expected_results
    assert trajectory.schema_version == data["schema_version"]
    assert trajectory.agent == data["agent"]
    assert trajectory.final_metrics == data.get("final_metrics")
    totals, trial = (
        data.get("final_metrics") or {},
        Trial.objects.get(),
    )  # a trajectory alone: its totals are the trial's
    assert (trial.input_tokens, trial.output_tokens, trial.cached_tokens, trial.cost_usd) == (
        totals.get("total_prompt_tokens"), totals.get("total_completion_tokens"),
        totals.get("total_cached_tokens"), totals.get("total_cost_usd"),
    )  # fmt: skip
    for step, raw in zip(Step.objects.order_by("index"), data["steps"], strict=True):
        assert step.raw == raw  # every field, `extra` included, as written


@pytest.mark.parametrize("path", ATIF_FILES, ids=lambda p: p.name)
def test_trajectory_api_returns_the_imported_file_and_it_validates(path, client_logged_in):
    import_path(path)
    trial = Trial.objects.get()
    response = client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/")
    assert response.status_code == 200
    exported = orjson.loads(b"".join(response.streaming_content))
    assert exported == orjson.loads(path.read_bytes())
    schema = orjson.loads(ATIF_SCHEMA.read_bytes())
    errors = sorted(Draft202012Validator(schema).iter_errors(exported), key=str)
    assert errors == []


def test_real_harbor_job_keeps_rewards_timings_tokens_and_verifier_output():
    job_dir = REFERENCE / "harbor" / "job-thinharness" / "job"
    import_path(job_dir)
    result = orjson.loads((job_dir / "configure-git-webserver__YfkUhxf" / "result.json").read_bytes())
    trial = Trial.objects.get()
    assert trial.name == result["trial_name"]
    assert trial.rewards == result["verifier_result"]["rewards"]
    assert trial.reward == 0.0 and trial.status == "failed"
    assert trial.task.name == result["task_name"] and trial.task.checksum == result["task_checksum"]
    assert trial.dataset.name == result["source"]
    assert trial.input_tokens == result["agent_result"]["n_input_tokens"]
    assert trial.output_tokens == result["agent_result"]["n_output_tokens"]
    assert set(trial.phases) == {"environment_setup", "agent_setup", "agent_execution", "verifier"}
    assert trial.documents["result"] == result
    ctrf = orjson.loads((job_dir / "configure-git-webserver__YfkUhxf" / "verifier" / "ctrf.json").read_bytes())
    assert trial.ctrf_tests == ctrf["results"]["tests"]
    assert "verifier/test-stdout.txt" in trial.texts
    assert trial.job.name and trial.job.result == orjson.loads((job_dir / "result.json").read_bytes())
    assert "trajectoryRef" in trial.missing  # ThinHarness did not commit agent/ files


def test_errored_harbor_trial_keeps_its_exception():
    import_path(REFERENCE / "harbor" / "job-thinharness" / "failed-trial")
    result = orjson.loads((REFERENCE / "harbor" / "job-thinharness" / "failed-trial" / "result.json").read_bytes())
    trial = Trial.objects.get()
    assert trial.status == "errored"
    assert trial.exception_type == result["exception_info"]["exception_type"]
    assert trial.exception_traceback == result["exception_info"]["exception_traceback"]
    assert trial.reward is None


def test_agentv_rows_become_trials_with_their_metadata_kept():
    path = REFERENCE / "agentv" / "multi-agent.eval.results.jsonl"
    import_path(path)
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    assert Trial.objects.filter(source_format="agentv").count() == len(rows)
    for row in rows:
        trial = Trial.objects.get(task__name=row["test_id"], configuration__key=row["target"])
        assert trial.reward == row["score"]
        assert trial.documents["row"] == row
        # its output[] messages are its steps, and their tool calls are indexed
        messages = row.get("output") or []
        assert [s.raw for s in trial.steps.order_by("index")] == messages
        calls = [(c["tool"], c.get("input")) for m in messages for c in m.get("tool_calls") or []]
        indexed = ToolCall.objects.filter(trial=trial).order_by("step__index", "pk")
        assert [(c.function_name, c.arguments) for c in indexed] == calls
        assert trial.step_count == len(messages) and trial.tool_call_count == len(calls)
    assert ToolCall.objects.filter(trial__source_format="agentv").count() > 0  # the file has some


def test_openchrome_runs_and_agentqc_trials_are_counted_from_the_file():
    envelope = orjson.loads((REFERENCE / "openchrome" / "realworld-task-completion.json").read_bytes())
    experiment = orjson.loads((REFERENCE / "lime-agentqc" / "lime-benchmark-experiment.json").read_bytes())
    import_path(REFERENCE / "openchrome" / "realworld-task-completion.json")
    import_path(REFERENCE / "lime-agentqc" / "lime-benchmark-experiment.json")
    runs = sum(len(entry.get("runs") or []) for entry in envelope["results"])
    assert Trial.objects.filter(source_format="openchrome").count() == runs
    assert Trial.objects.filter(source_format="agentqc").count() == len(experiment["trials"])


def test_agentqc_trials_carry_their_ids_and_an_evidence_pack_joined_to_one_brings_no_file_it_only_names():
    experiment = orjson.loads((REFERENCE / "lime-agentqc" / "lime-benchmark-experiment.json").read_bytes())
    import_path(REFERENCE / "lime-agentqc" / "lime-benchmark-experiment.json")
    written = {t["trial_id"]: t for t in experiment["trials"]}
    for trial in Trial.objects.filter(source_format="agentqc"):
        assert trial.benchmark["trialId"] == trial.name and trial.benchmark["taskId"] == written[trial.name]["task_id"]
        assert trial.benchmark["harborJobRef"] == written[trial.name]["job_ref"]
        assert "benchmark.datasetId" not in str(trial.missing)  # the ids are there; the files are not
        assert not trial.is_complete and "trajectoryRef" in trial.missing
    pack = orjson.loads((REFERENCE / "lime-agentruntime" / "benchmark-trial-pack.json").read_bytes())
    imp = import_path(REFERENCE / "lime-agentruntime" / "benchmark-trial-pack.json")
    assert [o["outcome"] for o in imp.outcomes] == ["imported"] and imp.outcomes[0]["joined"] == 1
    joined = Trial.objects.get(name=pack["benchmark"]["trialId"])
    assert joined.source_format == "agentqc" and not joined.is_complete  # its refs name files nobody imported
    assert {"trajectoryRef", "rewardDetailsRef", "artifactManifestRef"} <= set(joined.missing)
    flagged = {p["json_path"] for p in imp.problems if "the trial it joins has no readable file" in p["message"]}
    assert flagged == {f"refs.{ref}" for ref in pack["refs"] if ref != "agentQcReportRef"}  # every file it names


def test_openchromes_claim_eligibility_is_on_each_run_and_on_the_job_page(client_logged_in):
    path = REFERENCE / "openchrome" / "realworld-task-completion.json"
    claim = orjson.loads(path.read_bytes())["results"][0]["claimEligibility"]
    import_path(path)
    trial = Trial.objects.filter(source_format="openchrome").first()
    assert trial.provenance["claimEligibility"] == claim
    assert client_logged_in.get(f"/api/trials/{trial.pk}/").json()["provenance"]["claimEligibility"] == claim
    page = client_logged_in.get(trial.job.get_absolute_url()).content.decode()
    assert ("not eligible" if not claim["eligible"] else "eligible") in page and claim["tier"] in page
    run = orjson.loads(path.read_bytes())["results"][0]["runs"][0]
    first = Trial.objects.filter(source_format="openchrome").order_by("pk").first()
    header = client_logged_in.get(first.get_absolute_url()).content.decode()
    assert f"no steps imported · {run['toolCalls']} tool calls, as its run reports" in header  # not "0 tool calls"
    assert all(html.escape(reason) in page for reason in claim["reasons"])


@pytest.mark.parametrize(
    "path",
    [p for p in LONE_FILES if p.suffix in (".json", ".jsonl", ".toml")],
    ids=lambda p: str(p.relative_to(REFERENCE)),
)
def test_every_reference_data_file_outside_a_run_imports_on_its_own(path):
    imp = import_path(path)
    assert [o["outcome"] for o in imp.outcomes] == ["imported"], imp.problems


@pytest.mark.parametrize(
    "local, kind",
    [
        ("job/config.json", "harbor-job-config"),
        ("job/configure-git-webserver__YfkUhxf/lock.json", "harbor-trial-lock"),
        ("job/configure-git-webserver__YfkUhxf/verifier/ctrf.json", "ctrf-report"),
    ],
)
def test_harbor_job_config_lock_and_ctrf_files_alone_are_kept_as_documents(local, kind):
    path = REFERENCE / "harbor" / "job-thinharness" / local
    import_path(path)
    document = Document.objects.get()
    assert document.kind == kind and document.data == orjson.loads(path.read_bytes())


def test_qc_scenario_manifest_is_kept_as_a_document_with_its_counts():
    path = REFERENCE / "lime-app" / "agent-qc-scenarios.manifest.json"
    import_path(path)
    data = orjson.loads(path.read_bytes())
    document = Document.objects.get()
    assert document.data == data
    assert document.counts["scenarios"] == len(data["scenarios"])


def test_runtime_event_files_keep_every_field():
    path = REFERENCE / "lime-agentruntime" / "tool-approval-action-required-event.json"
    import_path(path)
    event = RuntimeEvent.objects.get()
    assert event.raw == orjson.loads(path.read_bytes())
    assert event.type == "action.required"


def test_importing_the_same_folder_twice_adds_nothing(imported_reference):
    before = {model: model.objects.count() for model in (Trial, Step, Blob, PackFile, Document, RuntimeEvent)}
    again = import_path(REFERENCE)
    assert {o["outcome"] for o in again.outcomes} <= {"already imported", "skipped"}
    assert {model: model.objects.count() for model in before} == before


def test_a_runs_files_named_after_it_in_a_folder_of_runs_are_one_trial_and_its_subagent_links_resolve(
    client_logged_in, tmp_path
):
    folder = REFERENCE / "harbor" / "atif" / "terminus-2"
    run = sorted(folder.glob("hello-world-context-summarization.trajectory*.json"))
    assert len(run) == 4  # the main file and the three summarization subagents beside it
    imp = import_path(folder)
    trial = Trial.objects.get(trajectories__path__endswith="hello-world-context-summarization.trajectory.json")
    roles = sorted(trial.trajectories.values_list("role", flat=True))
    assert roles == ["main", "subagent", "subagent", "subagent"]
    assert {t.blob.read() for t in trial.trajectories.all()} == {path.read_bytes() for path in run}  # nothing lost
    lone = {p.name for p in folder.glob("*.json")} - {p.name for p in run}
    continuations = {n for n in lone if ".trajectory.cont-" in n and n.split(".cont-")[0] + ".json" in lone}
    assert Trial.objects.count() == 1 + len(lone - continuations) and imp.rejected_count == 0  # a run's segments: one
    page = client_logged_in.get(trial.get_absolute_url()).content.decode()
    assert "↳ subagent" in page and "(not in this trial)" not in page
