"""With a broker, `POST /v1/traces` sends a message for a trial's batch only when none for that trial is
waiting (trials/live/tasks.py `send_read`: one SET NX on the real Redis), and the task reads every batch of
the trial kept by then (trials/live/batches.py `read`); so a batch whose request sent nothing is read all the
same, by a real Celery worker, and one whose trial's message was lost by the sweep once the marker is gone."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import redis
from celery import current_app
from django.db import connection
from django.utils import timezone
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from rest_framework.authtoken.models import Token

from core.broker import PREFIX
from core.locks import own_connection
from tests.builders import HANG_GUARD, TEST_REDIS_URL, on_broker, running_worker
from tests.live.helpers import agent_run, runner_client
from trials.live import batches, tasks
from trials.models import ReceivedBatch, Trial

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]  # (a worker process reads them)
PROTOBUF = "application/x-protobuf"


@pytest.fixture
def broker(isolated_storage):
    """The real Redis as this process's broker, emptied, with no worker reading it yet."""
    server = redis.Redis.from_url(TEST_REDIS_URL)
    server.flushdb()
    with on_broker(broker_url=TEST_REDIS_URL, task_always_eager=False):
        yield server


def queued(server: redis.Redis) -> int:
    return int(server.llen(current_app.conf.task_default_queue))


def export(client, spans: list) -> None:
    answer = client.post("/v1/traces", encode_spans(spans).SerializeToString(), content_type=PROTOBUF)
    assert answer.status_code == 200, answer.content


def wait_for_the_end(trial_key: str) -> Trial:
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline:
        trial = Trial.objects.filter(key=trial_key).first()
        if trial is not None and trial.status != "running":
            return trial
        time.sleep(0.2)
    raise AssertionError(f"{trial_key} did not end")


def test_batches_sent_while_the_trials_message_waits_send_none_and_are_read_by_its_task(broker, isolated_storage):
    runner, token = runner_client()
    spans = agent_run("otel-one-message", 12)  # (13 spans: five bodies, the root last)
    for start in range(0, len(spans), 3):
        export(runner, spans[start : start + 3])
    sender = Token.objects.get(key=token).user_id
    marker = PREFIX + batches.trial_marker("lime:otel-one-message", sender)
    assert ReceivedBatch.objects.count() == 5 and queued(broker) == 1 and broker.exists(marker)

    with running_worker(isolated_storage, flush=False):
        trial = wait_for_the_end("lime:otel-one-message")
    assert (trial.status, trial.reward) == ("passed", 1.0)
    assert list(trial.steps.order_by("index").values_list("message_text", flat=True)) == [
        f"answer {n}" for n in range(12)
    ]
    assert not ReceivedBatch.objects.exists() and not broker.exists(marker)


def test_a_task_reads_its_share_of_a_trials_batches_and_sends_a_message_for_the_rest(
    broker, isolated_storage, monkeypatch
):
    monkeypatch.setattr(batches, "GATHER", 2)
    monkeypatch.setattr(batches, "GROUPS_A_TASK", 1)
    runner, token = runner_client()
    spans = agent_run("otel-share", 4)
    for span in spans:  # (five bodies of one span each)
        export(runner, [span])
    first = ReceivedBatch.objects.order_by("pk").first()
    assert first is not None and queued(broker) == 1
    broker.delete(current_app.conf.task_default_queue)  # (its message, taken here instead of by a worker)

    tasks.read_otlp_batch_task(first.pk, first.trial_key, first.sent_by_id)
    assert ReceivedBatch.objects.count() == 3 and queued(broker) == 1  # (two read; a message for the other three)
    with running_worker(isolated_storage, flush=False):
        trial = wait_for_the_end("lime:otel-share")
    assert trial.status == "passed" and trial.steps.count() == 4 and not ReceivedBatch.objects.exists()


def test_a_batch_whose_trials_message_was_lost_is_swept_once_the_marker_is_gone(broker, settings):
    settings.IMPORTS_IN_THREAD = False
    runner, token = runner_client()
    export(runner, agent_run("otel-lost-message", 2))
    broker.delete(current_app.conf.task_default_queue)  # (the message lost; its marker kept)
    ReceivedBatch.objects.update(received_at=timezone.now() - timedelta(minutes=5))
    sender = Token.objects.get(key=token).user_id
    marker = PREFIX + batches.trial_marker("lime:otel-lost-message", sender)
    assert broker.exists(marker) and batches.stale() == []  # (a message for the trial is said to wait)

    broker.delete(marker)  # (as it expires: TRIAL_MARKER_SECONDS)
    [(pk, key, by)] = batches.stale()
    assert (key, by) == ("lime:otel-lost-message", sender)
    assert tasks.requeue_stale_otlp_batches() == 1 and queued(broker) == 1 and broker.exists(marker)
    tasks.read_otlp_batch_task(pk, key, by)  # (what the worker would run)
    assert Trial.objects.get(key=key).status == "passed" and not ReceivedBatch.objects.exists()


def test_a_batch_kept_while_the_one_before_it_is_deleted_by_its_reader_is_not_queued_behind_it(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("the statement that keeps a body and sees the batches before it is PostgreSQL's")
    _, token = runner_client()
    sender = Token.objects.get(key=token).user
    body = encode_spans(agent_run("otel-behind", 1)[:1]).SerializeToString()
    first, queued = batches.accept_if_clear(body, True, sender, ["otel-behind"]) or (None, None)
    assert first is not None and queued is False
    second, queued = batches.accept_if_clear(body, True, sender, ["otel-behind"]) or (None, None)
    assert second is not None and queued is True  # (the first waits: its reader will find the second too)

    deleting, done = threading.Event(), threading.Event()

    def reader() -> None:  # (as _read_group deletes what it read, in a transaction still open for a moment)
        with own_connection() as conn, conn.cursor() as cursor:
            conn.set_autocommit(False)
            cursor.execute("DELETE FROM trials_receivedbatch WHERE id IN (%s, %s)", [first.pk, second.pk])
            deleting.set()
            time.sleep(1)
            conn.commit()
        done.set()

    thread = threading.Thread(target=reader)
    thread.start()
    assert deleting.wait(HANG_GUARD)
    third, queued = batches.accept_if_clear(body, True, sender, ["otel-behind"]) or (None, None)
    thread.join(HANG_GUARD)
    assert done.is_set() and third is not None and queued is False  # (waited for the DELETE: none before it now)
