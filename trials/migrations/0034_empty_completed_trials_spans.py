"""Spans received for a trial that completed before its spans were emptied at completion keep the
values a redaction may name: empty them now, as completion does (ids kept, against a retry)."""

from django.db import migrations


def empty_completed_trials_spans(apps, schema_editor):
    ReceivedSpan = apps.get_model("trials", "ReceivedSpan")
    ReceivedSpan.objects.filter(trial__is_complete=True).exclude(span={}).update(span={})


class Migration(migrations.Migration):
    dependencies = [("trials", "0033_trial_partial_status")]

    operations = [migrations.RunPython(empty_completed_trials_spans, migrations.RunPython.noop)]
