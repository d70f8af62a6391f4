"""`POST /v1/traces` answers once the body is kept (one row); its spans are read, kept and written as
steps off the request (the embedded worker's thread here, a Celery task with a broker), so a body's
answer waits for none of them, and a trace's end (which reads every span of the trial again) never runs
in a request. A batch whose message was lost is read by the sweep; what could not be written is a
problem on the trial."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult
from rest_framework.authtoken.models import Token

from core.locks import worker_lock
from tests.builders import HANG_GUARD, running_worker
from tests.live.helpers import agent_run, runner_client, spine
from trials.live import batches, tasks, traces, trajectories
from trials.models import ReceivedBatch, ReceivedSpan, Trial
from trials.queue import embedded_worker

pytestmark = pytest.mark.django_db(transaction=True)  # the worker thread has its own connection
PROTOBUF = "application/x-protobuf"


@pytest.fixture
def held_worker(settings):
    """The embedded worker (no broker), kept busy until the test lets it go: what a request answers
    cannot then depend on how fast the thread is."""
    settings.IMPORTS_IN_THREAD = True
    gate = threading.Event()
    embedded_worker().submit(gate.wait, 60)
    yield gate
    gate.set()


def drained() -> None:
    embedded_worker().submit(lambda: None).result(timeout=HANG_GUARD)  # (one thread: what came before is done)


def test_the_exporter_is_answered_before_the_steps_are_written_and_they_appear_when_written(live_server, held_worker):
    _, token = runner_client()
    spans = agent_run("otel-off-request", 120)
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Token {token}"}, timeout=120
    )
    for start in range(0, len(spans), 50):
        assert exporter.export(spans[start : start + 50]) is SpanExportResult.SUCCESS
    assert ReceivedBatch.objects.count() == 3  # (121 spans, 50 a batch: each body kept whole, none read)
    assert not Trial.objects.filter(key="lime:otel-off-request").exists() and not ReceivedSpan.objects.exists()

    held_worker.set()
    drained()
    trial = Trial.objects.get(key="lime:otel-off-request")
    assert (trial.status, trial.reward) == ("passed", 1.0)
    texts = list(trial.steps.order_by("index").values_list("message_text", flat=True))
    assert texts == [f"answer {n}" for n in range(120)]
    assert not ReceivedSpan.objects.filter(trial=trial).exclude(span={}).exists()  # (bodies emptied at its end)
    assert trial.events.filter(type="benchmark.trial.completed").count() == 1
    assert not ReceivedBatch.objects.exists()  # (a batch read is deleted)

    assert exporter.export(spans[-50:]) is SpanExportResult.SUCCESS  # a retry of what it stored: no news
    drained()
    assert trial.steps.count() == 120 and ReceivedSpan.objects.filter(trial=trial).count() == len(spans)


def test_a_batch_read_before_the_one_sent_before_it_reads_that_one_first(live_server, held_worker):
    """Two server processes each read the batch its request kept: the one holding the root span may come
    first. Its spans must not end the trial before the earlier batch's spans are kept."""
    _, token = runner_client()
    spans = agent_run("otel-out-of-order", 6)  # (the root span last, alone in the second body)
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Token {token}"}, timeout=120
    )
    assert exporter.export(spans[:-1]) is SpanExportResult.SUCCESS
    assert exporter.export(spans[-1:]) is SpanExportResult.SUCCESS
    earlier, later = ReceivedBatch.objects.order_by("pk")
    batches.read(later.pk)  # (as the other process would, before this one's thread reads the earlier)
    batches.read(earlier.pk)
    trial = Trial.objects.get(key="lime:otel-out-of-order")
    assert (trial.status, trial.reward) == ("passed", 1.0)
    texts = list(trial.steps.order_by("index").values_list("message_text", flat=True))
    assert texts == [f"answer {n}" for n in range(6)] and not trial.problems
    assert not ReceivedBatch.objects.exists()


def test_spans_unread_when_the_trial_is_completed_by_command_write_no_step_and_say_so_on_it(
    live_server, held_worker, client_logged_in
):
    runner, token = runner_client()
    started = runner.post("/api/commands/start_benchmark_trial/", spine("otel-pending-end"), format="json")
    assert started.status_code in (200, 201), started.content
    spans = agent_run("otel-pending-end", 10)[:-1]  # (no root: the run does not end by its spans)
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Token {token}"}, timeout=120
    )
    assert exporter.export(spans) is SpanExportResult.SUCCESS  # (the trial running: accepted, not yet read)
    trial = Trial.objects.get(key="lime:otel-pending-end")
    done = runner.post(
        "/api/commands/complete_benchmark_trial/", {"trial_id": trial.pk, "status": "completed"}, format="json"
    )
    assert done.status_code == 200, done.content

    held_worker.set()
    drained()
    trial.refresh_from_db()
    assert trial.status == "passed" and not trajectories.sent_trajectories(trial).exists()  # (no step of a span)
    assert not trial.steps.filter(message_text__startswith="answer").exists()
    assert not ReceivedSpan.objects.filter(trial=trial).exclude(span={}).exists()
    assert not ReceivedSpan.objects.filter(trial=trial, lane=traces.PENDING).exists()
    assert not ReceivedBatch.objects.exists()
    [problem] = trial.problems  # (on its page: the spans that came too late are not silently gone)
    assert problem["severity"] == "error" and problem["file"] == "POST /v1/traces"
    assert problem["message"].startswith(f"{len(spans)} spans received as it ended were not written")
    assert f"(Benchviewer trial {trial.pk}) is passed" in problem["message"]
    page = client_logged_in.get(f"/trials/{trial.pk}/")
    assert f"{len(spans)} spans received as it ended were not written" in page.content.decode()


def test_a_batch_whose_message_was_lost_is_read_by_the_sweep_once_it_is_older_than_the_grace(db, settings):
    settings.IMPORTS_IN_THREAD = False  # (no broker: the sweep's task runs here)
    _, token = runner_client()
    spans = agent_run("otel-stranded", 3)
    body = encode_spans(spans).SerializeToString()
    sender = Token.objects.get(key=token).user
    stranded = batches.accept(body, True, sender, ["otel-stranded"])  # (as the request keeps it; no message sent)
    assert tasks.requeue_stale_otlp_batches() == 0  # (younger than IMPORT_QUEUED_GRACE: its message may come)
    ReceivedBatch.objects.filter(pk=stranded.pk).update(received_at=timezone.now() - timedelta(minutes=5))
    with worker_lock(batches.lock_name(stranded.pk), wait=0):  # a worker on it: not stranded
        assert tasks.requeue_stale_otlp_batches() == 0
    assert tasks.requeue_stale_otlp_batches() == 1
    trial = Trial.objects.get(key="lime:otel-stranded")
    assert (trial.status, trial.reward) == ("passed", 1.0)
    assert list(trial.steps.order_by("index").values_list("message_text", flat=True)) == [
        f"answer {n}" for n in range(3)
    ]
    assert not ReceivedBatch.objects.exists() and tasks.requeue_stale_otlp_batches() == 0


@pytest.mark.services
def test_with_a_broker_a_separate_celery_worker_writes_the_steps_and_ends_the_run(live_server, isolated_storage):

    _, token = runner_client()
    spans = agent_run("otel-celery", 120)
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Token {token}"}, timeout=120
    )
    with running_worker(isolated_storage):
        for start in range(0, len(spans), 50):
            assert exporter.export(spans[start : start + 50]) is SpanExportResult.SUCCESS
        for _ in range(600):  # (waiting for the worker's state, 0.2 s a look)
            trial = Trial.objects.filter(key="lime:otel-celery").first()
            if trial is not None and trial.status != "running":
                break
            time.sleep(0.2)
    assert trial is not None and not ReceivedBatch.objects.exists()
    assert (trial.status, trial.reward) == ("passed", 1.0)
    assert list(trial.steps.order_by("index").values_list("message_text", flat=True)) == [
        f"answer {n}" for n in range(120)
    ]
    assert not ReceivedSpan.objects.filter(trial=trial, lane=traces.PENDING).exists()


def test_on_postgresql_a_body_is_kept_by_one_statement_that_leaves_the_connections_setting_as_it_was(db, settings):
    if connection.vendor != "postgresql":
        pytest.skip("the asynchronous commit is PostgreSQL's (SQLite's WAL waits for no disk at commit either)")
    settings.OTLP_DURABLE_ACCEPT = False
    _, token = runner_client()
    sender = Token.objects.get(key=token).user
    body = encode_spans(agent_run("otel-one-statement", 2)).SerializeToString()
    with CaptureQueriesContext(connection) as queries:
        kept = batches.accept(body, True, sender, ["otel-one-statement"])
    assert len(queries.captured_queries) == 1
    assert (
        "set_config('synchronous_commit', COALESCE('off', current_setting('synchronous_commit')), true)"
        in (queries[0]["sql"])
    )
    row = ReceivedBatch.objects.get(pk=kept.pk)
    assert (bytes(row.body), row.trial_key, row.sent_by_id) == (body, "lime:otel-one-statement", sender.pk)
    assert row.received_at == kept.received_at
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"  # (the statement's own transaction only)
    settings.OTLP_DURABLE_ACCEPT = True  # (the server's own setting kept: the commit waits for the disk)
    with CaptureQueriesContext(connection) as queries:
        batches.accept(body, True, sender, ["otel-one-statement"])
    assert "COALESCE(NULL, current_setting('synchronous_commit'))" in queries[0]["sql"]


def test_a_batch_of_a_running_trial_is_kept_by_one_statement_on_postgresql(held_worker):
    runner, _ = runner_client()
    spans = agent_run("otel-kept-at-once", 4)[:-1]  # (no root: the trial stays running)
    body = encode_spans(spans[:2]).SerializeToString()
    assert runner.post("/v1/traces", body, content_type=PROTOBUF).status_code == 200  # (the token known after)
    with CaptureQueriesContext(connection) as queries:
        answer = runner.post("/v1/traces", encode_spans(spans[2:]).SerializeToString(), content_type=PROTOBUF)
    assert answer.status_code == 200 and ReceivedBatch.objects.count() == 2
    if connection.vendor == "postgresql":  # (elsewhere the trials are looked at first: traces.screened)
        [insert] = queries.captured_queries
        assert "NOT EXISTS" in insert["sql"] and "trials_trial" in insert["sql"]


def test_a_batch_for_another_accounts_trial_is_kept_only_for_one_granted_every_trial(held_worker):
    owner, _ = runner_client()
    started = owner.post("/api/commands/start_benchmark_trial/", spine("otel-owned"), format="json")
    assert started.status_code in (200, 201), started.content
    body = encode_spans(agent_run("otel-owned", 2)[:-1]).SerializeToString()
    other, _ = runner_client(name="runner-2")
    answer = other.post("/v1/traces", body, content_type=PROTOBUF)
    refused = ExportTraceServiceResponse.FromString(answer.content).partial_success
    assert answer.status_code == 200 and refused.rejected_spans == 2 and "another account" in refused.error_message
    assert not ReceivedBatch.objects.exists()

    granted, token = runner_client(name="runner-3")
    Token.objects.get(key=token).user.user_permissions.add(Permission.objects.get(codename="write_any_live_trial"))
    answer = granted.post("/v1/traces", body, content_type=PROTOBUF)
    kept = ExportTraceServiceResponse.FromString(answer.content)
    assert answer.status_code == 200 and not kept.partial_success.rejected_spans
    assert ReceivedBatch.objects.count() == 1
