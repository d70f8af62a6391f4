"""The bodies `POST /v1/traces` accepts (ReceivedBatch), read off the request.

The request reads of a body only what its answer needs (`outline`: each span's ids, name and trial
id, no attribute else), keeps it whole as one row (`accept`) and asks for it to be read
(trials/live/tasks.py); the task (`read`) parses it, keeps its new spans (traces.record) and writes
their steps (traces.process), and deletes the row once they are written. So an exporter's answer
waits for one INSERT, whatever the spans hold.

A batch of one trial is read with every batch of that trial (and sender) waiting, in the order they
came, so its request sends a message only when none for the trial is waiting (`trial_marker`, set
with SET NX by the request that sends one): the task clears the marker before it looks for the
trial's batches, so a batch kept before its request found the marker set is among those it finds.

A batch whose message or worker was lost is found by `stale` (older than IMPORT_QUEUED_GRACE, no
message waiting in the broker for it or its trial, nobody holding its or its trial's lock:
core/broker.py, core/locks.py, as imports and comparisons are) and sent again by the sweep (beat,
and a worker's start). Reading a batch twice is harmless: a span stored before is no news. A
failure that is no outage is kept on the trial's problems (traces.note_problem), not only logged.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from typing import Any

import orjson
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from core.broker import clear_sent, waiting_in_broker
from core.locks import unheld, worker_lock
from trials.ingest.formats import otlp
from trials.live import traces
from trials.models import ReceivedBatch

log = logging.getLogger(__name__)

WHERE = "POST /v1/traces"
OUTAGE = (ConnectionError, OperationalError, InterfaceError)  # (the task retries these later)
LOCK_WAIT_SECONDS = 5.0  # a redelivered message may come a moment before the dead holder's lock is freed
GATHER = 20  # batches of one trial read at once
GROUPS_A_TASK = 10  # GATHER-groups one task reads of a trial; the rest in a message of its own, after the work queued
TRIAL_MARKER_SECONDS = 600  # a marker whose message was lost holds the trial's later batches back this long at most
TRIAL_ID = "benchmark.trial.id"  # the one attribute the answer needs (otlp.spans_by_trial)


def sent_marker(batch_pk: int) -> str:
    return f"otlp-batch-sent:{batch_pk}"


def lock_name(batch_pk: int) -> str:
    return f"otlp-batch-{batch_pk}"


def _trial_name(trial_key: str, sent_by: int | None) -> str:
    return f"{sent_by}-{hashlib.sha256(trial_key.encode()).hexdigest()[:32]}"  # (a key is up to 500 characters)


def trial_marker(trial_key: str, sent_by: int | None) -> str:
    return f"otlp-trial-sent:{_trial_name(trial_key, sent_by)}"


def trial_lock_name(trial_key: str, sent_by: int | None) -> str:
    return f"otlp-trial-{_trial_name(trial_key, sent_by)}"


def outline(body: bytes) -> dict[str, Any]:
    """An OTLP/protobuf body as the OTLP/JSON `otlp.read_spans` reads, with only what the answer needs:
    each span's ids and name, and the trial id its resource or it carries. ValueError when it is no
    ExportTraceServiceRequest. (The task reads the whole body: `otlp.decode_protobuf`.)"""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise ValueError(f"not an OTLP ExportTraceServiceRequest: {exc}") from exc
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _trial_ids(resource.resource.attributes)},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": span.trace_id.hex(),
                                "spanId": span.span_id.hex(),
                                "name": span.name,
                                "attributes": _trial_ids(span.attributes),
                            }
                            for span in scope.spans
                        ]
                    }
                    for scope in resource.scope_spans
                ],
            }
            for resource in request.resource_spans
        ]
    }


def _trial_ids(pairs: Any) -> list[dict[str, Any]]:
    return [MessageToDict(kv) for kv in pairs if kv.key == TRIAL_ID]


def accept(body: bytes, protobuf: bool, user: Any, trial_ids: list[str]) -> ReceivedBatch:
    """The body kept whole, to be read off the request: one INSERT. On PostgreSQL, unless
    OTLP_DURABLE_ACCEPT, its commit does not wait for the disk (docs/configuration.md says what a
    database crash may lose; an app crash loses nothing): the wait was most of the exporter's."""
    batch = _batch(body, protobuf, user, trial_ids)
    if connection.vendor != "postgresql":  # (SQLite's WAL with synchronous=NORMAL waits for no disk at commit either)
        ReceivedBatch.objects.bulk_create([batch])  # (the queue's own row, as the test of live writes allows)
    else:
        _insert(batch, [], clear_only=False)
    return batch


def accept_if_clear(body: bytes, protobuf: bool, user: Any, trial_ids: list[str]) -> tuple[ReceivedBatch, bool] | None:
    """The body kept as `accept` keeps it, by the one statement that looks at its trials too: kept when none of
    them has ended or was started by another account (the request's common case, which so makes no query
    before); None, nothing written, when one may have, or off PostgreSQL: the request screens it first
    (traces.screened), as with an account that may write into any trial. With the batch, whether another
    batch of its trial and sender was waiting before it: the statement locks that one until it commits, so
    the task that reads it (and deletes it after) finds this one too; the request sends no message then."""
    if connection.vendor != "postgresql":
        return None
    batch = _batch(body, protobuf, user, trial_ids)
    queued = _insert(batch, [f"lime:{trial_id}"[:500] for trial_id in trial_ids], clear_only=True)
    return None if batch.pk is None else (batch, queued)


def _batch(body: bytes, protobuf: bool, user: Any, trial_ids: list[str]) -> ReceivedBatch:
    key = f"lime:{trial_ids[0]}"[:500] if len(trial_ids) == 1 else ""  # (as service.start_trial keys it)
    return ReceivedBatch(body=body, protobuf=protobuf, sent_by=user, trial_key=key, received_at=timezone.now())


def _insert(batch: ReceivedBatch, keys: list[str], clear_only: bool) -> bool:
    """KEEP: one statement, so one round trip (not BEGIN, SET LOCAL, INSERT, COMMIT); the batch's pk if it wrote
    the row; whether another batch of its trial was waiting before it."""
    setting = None if settings.OTLP_DURABLE_ACCEPT else "off"
    row: list[Any] = [batch.body, batch.protobuf, batch.sent_by_id, batch.trial_key, batch.received_at]
    trials: list[Any] = [not clear_only, keys, batch.sent_by_id]
    with connection.cursor() as cursor:
        cursor.execute(KEEP, [setting, *row, *trials, batch.trial_key, batch.sent_by_id])
        batch.pk, queued = cursor.fetchone()
    return bool(queued)


# The setting for its own transaction (set_config's `true`: SET LOCAL), which its commit reads (a statement out
# of any atomic block is its own transaction); OTLP_DURABLE_ACCEPT keeps the server's. The INSERT, unless
# asked to keep it only then, when no trial of the body has ended or is another account's. `earlier`: a batch
# of its trial waiting before it, locked (FOR KEY SHARE) so that its reader's DELETE waits for this commit.
KEEP = """
WITH setting AS (SELECT set_config('synchronous_commit', COALESCE(%s, current_setting('synchronous_commit')), true)),
kept AS (
    INSERT INTO trials_receivedbatch (body, protobuf, sent_by_id, trial_key, received_at)
    SELECT %s, %s, %s, %s, %s FROM setting WHERE %s OR NOT EXISTS (
        SELECT 1 FROM trials_trial WHERE key = ANY(%s) AND (status <> 'running' OR started_by_id IS DISTINCT FROM %s)
    )
    RETURNING id
),
earlier AS (
    SELECT id FROM trials_receivedbatch WHERE trial_key = %s AND trial_key <> '' AND sent_by_id = %s
    ORDER BY id LIMIT 1 FOR KEY SHARE
)
SELECT (SELECT id FROM kept), EXISTS (SELECT 1 FROM earlier)
"""


def read(batch_pk: int, trial_key: str = "", sent_by: int | None = None) -> tuple[str, int | None] | None:
    """The batch read, and with a trial (named by the message, else by the batch) every batch of it waiting,
    from the first: their spans kept and their steps written, GATHER at a time (a worker behind its exporter
    catches up in fewer, larger writes; one read first by another worker would end the trial by its root
    span before the spans sent before it were kept), then the rows deleted. The trial whose batches still
    wait after GROUPS_A_TASK groups, for the task to send a message of their own; else None. Another worker
    on the trial (its lock held: it reads on past this one's start), or the batch gone (read before): nothing
    to do. An outage raises (the task runs again later, the rows kept); any other failure is kept on the
    trial it stopped."""
    clear_sent(sent_marker(batch_pk))
    if not trial_key:  # (a message of a sweep before trials were named, or of a batch of several trials)
        batch = ReceivedBatch.objects.filter(pk=batch_pk).only("trial_key", "sent_by").first()
        if batch is None:
            return None
        if not batch.trial_key:
            _read_alone(batch_pk)
            return None
        trial_key, sent_by = batch.trial_key, batch.sent_by_id
    clear_sent(trial_marker(trial_key, sent_by))  # from here on a batch kept is read below, or its request sends
    with worker_lock(trial_lock_name(trial_key, sent_by), wait=LOCK_WAIT_SECONDS) as held:
        if not held:
            return None
        waiting = ReceivedBatch.objects.select_related("sent_by").filter(trial_key=trial_key, sent_by_id=sent_by)
        for _ in range(GROUPS_A_TASK):
            if not (group := list(waiting.order_by("pk")[:GATHER])):
                return None
            _read_group(group[0], group)
        return (trial_key, sent_by) if waiting.exists() else None


def _read_alone(batch_pk: int) -> None:
    """A batch of several trials: read by itself, under its own lock."""
    with worker_lock(lock_name(batch_pk), wait=LOCK_WAIT_SECONDS) as held:
        batch = ReceivedBatch.objects.select_related("sent_by").filter(pk=batch_pk).first() if held else None
        if batch is not None:
            _read_group(batch, [batch])


def _read_group(batch: ReceivedBatch, group: list[ReceivedBatch]) -> None:
    """The batches' spans kept and their steps written, trial by trial, in the order they arrived; then the rows
    deleted."""
    by_trial: dict[str, list[otlp.Span]] = {}
    for each in group:
        for trial_id, members in _spans(each).items():
            by_trial.setdefault(trial_id, []).extend(members)
    for trial_id, members in by_trial.items():
        _read_trial(batch, trial_id, members)
    ReceivedBatch.objects.filter(pk__in=[each.pk for each in group]).delete()


def _spans(batch: ReceivedBatch) -> dict[str, list[otlp.Span]]:
    body = bytes(batch.body)
    try:
        data = otlp.decode_protobuf(body) if batch.protobuf else orjson.loads(body)
    except ValueError as exc:  # (the request read it: this is a bug, and the batch cannot be read again)
        log.error("OTLP batch %s no longer reads (%s): dropped", batch.pk, exc)
        return {}
    spans, _ = otlp.read_spans(data, WHERE)  # (the request's answer named the spans it refused)
    return otlp.spans_by_trial(spans)


def _read_trial(batch: ReceivedBatch, trial_id: str, spans: list[otlp.Span]) -> None:
    try:
        refused, trial = traces.record(trial_id, spans, batch.sent_by)
        if refused:  # (the trial ended, or another account started it, since the request looked)
            why = refused[0][1]
            log.warning("OTLP batch %s: %d spans of trial %r refused: %s", batch.pk, len(refused), trial_id, why)
        if trial is not None:
            traces.process(trial.pk)
    except OUTAGE:
        raise
    except Exception as exc:  # a bug: kept where the trial's reader sees it, and the other trials read
        log.exception("OTLP batch %s: trial %r failed", batch.pk, trial_id)
        traces.note_problem(trial_id, f"{len(spans)} spans received were not written as steps ({exc!r})")


def stale() -> list[tuple[int, str, int | None]]:
    """Batches older than the grace with no message waiting and no worker on them, or their trial: each as
    (pk, trial key, sender)."""
    grace = timezone.now() - timedelta(seconds=settings.IMPORT_QUEUED_GRACE)
    old = ReceivedBatch.objects.filter(received_at__lt=grace).order_by("pk")
    waiting = [
        (pk, key, sender)
        for pk, key, sender in old.values_list("pk", "trial_key", "sent_by_id")
        if not waiting_in_broker(sent_marker(pk)) and not (key and waiting_in_broker(trial_marker(key, sender)))
    ]
    locks = {pk: [lock_name(pk)] + ([trial_lock_name(key, sender)] if key else []) for pk, key, sender in waiting}
    gone = set(unheld(sorted({name for names in locks.values() for name in names})))
    return [(pk, key, sender) for pk, key, sender in waiting if gone.issuperset(locks[pk])]
