"""Trials completed before spans were emptied at completion: the migration empties their spans."""

from __future__ import annotations

import pytest

from tests.builders import migrate_to
from trials.models import ReceivedSpan


@pytest.mark.django_db(transaction=True)
def test_the_migration_empties_the_spans_of_completed_trials_and_keeps_a_running_ones():
    old = migrate_to(("trials", "0033_trial_partial_status"))
    Trial, Span = old.get_model("trials", "Trial"), old.get_model("trials", "ReceivedSpan")
    done = Trial.objects.create(key="done", name="done", source_format="otlp", is_complete=True)
    running = Trial.objects.create(key="running", name="running", source_format="otlp", is_complete=False)
    body = {"name": "chat", "attributes": {"gen_ai.prompt": "a secret the runner redacted later"}}
    for trial in (done, running):
        Span.objects.create(trial=trial, trace_id="a" * 32, span_id="b" * 16, span=body)
    migrate_to()
    assert ReceivedSpan.objects.get(trial_id=done.pk).span == {}  # its id kept, against a retry
    assert ReceivedSpan.objects.get(trial_id=running.pk).span == body  # still needed to read the trial again
