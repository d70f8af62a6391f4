"""Context imported before a redaction covered its item in every file of the trial, through list
indices in its paths, by every id key and at every depth (trials.ingest.agentcontext): the index
is scrubbed again by those rules. The stored packs keep the original bytes."""

from django.db import migrations

from trials.migrations import _frozen_redaction as rules


def scrub_again(apps, schema_editor):
    RuntimeEvent = apps.get_model("trials", "RuntimeEvent")
    ContextRecord = apps.get_model("trials", "ContextRecord")
    trial_ids = set(RuntimeEvent.objects.exclude(trial=None).values_list("trial_id", flat=True).distinct().order_by())
    trial_ids |= set(ContextRecord.objects.exclude(trial=None).values_list("trial_id", flat=True).distinct().order_by())
    groups = [{"trial_id": trial_id} for trial_id in sorted(trial_ids)]
    loose = RuntimeEvent.objects.filter(trial=None).values_list("pack_id", flat=True).distinct().order_by()
    groups += [{"trial_id": None, "pack_id": pack_id} for pack_id in loose]
    for where in groups:
        events = list(RuntimeEvent.objects.filter(**where).only("raw", "payload", "refs"))
        records = list(ContextRecord.objects.filter(**where).only("kind", "record_id", "status", "data"))
        named = rules.collect_redactions([e.raw for e in events] + [r.data for r in records])
        if not named and not rules.has_redaction_marks([e.raw for e in events] + [r.data for r in records]):
            continue
        changed_events = []
        for event in events:
            scrubbed = [rules.scrub_tree(value, named) for value in (event.raw, event.payload, event.refs)]
            if scrubbed != [event.raw, event.payload, event.refs]:
                event.raw, event.payload, event.refs = scrubbed
                changed_events.append(event)
        changed_records = []
        for record in records:
            data = rules.scrub_tree(record.data, named)
            if record.kind == "item" and record.record_id in named:
                data = rules.scrub_redacted(data, named[record.record_id].get("fields"), force=True)
                if record.status != "redacted":
                    record.status, record.redaction_state = "redacted", "redacted"
                    changed_records.append(record)
            if data != record.data:
                record.data = data
                changed_records.append(record)
        RuntimeEvent.objects.bulk_update(changed_events, ["raw", "payload", "refs"], batch_size=500)
        fields = ["data", "status", "redaction_state"]
        ContextRecord.objects.bulk_update(list({r.pk: r for r in changed_records}.values()), fields, batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("trials", "0019_step_refs_name_their_trajectory"),
    ]

    operations = [
        migrations.RunPython(scrub_again, migrations.RunPython.noop),
    ]
