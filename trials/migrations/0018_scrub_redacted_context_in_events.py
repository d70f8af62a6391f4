"""Runtime events imported before context items in them were scrubbed (trials.ingest.lime.without_redacted_context):
their redacted items are scrubbed in the index now. The stored packs keep the original bytes."""

from django.db import migrations

from trials.migrations import _frozen_redaction as rules


def scrub_stored_events(apps, schema_editor):
    RuntimeEvent = apps.get_model("trials", "RuntimeEvent")
    for pack_id, trial_id in RuntimeEvent.objects.values_list("pack_id", "trial_id").distinct().order_by():
        events = list(RuntimeEvent.objects.filter(pack_id=pack_id, trial_id=trial_id).only("raw", "payload", "refs"))
        named = rules.collect_redactions([event.raw for event in events])
        changed = []
        for event in events:
            scrubbed = [rules.scrub_tree(value, named) for value in (event.raw, event.payload, event.refs)]
            if scrubbed != [event.raw, event.payload, event.refs]:
                event.raw, event.payload, event.refs = scrubbed
                changed.append(event)
        RuntimeEvent.objects.bulk_update(changed, ["raw", "payload", "refs"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("trials", "0017_trial_files_sha256"),
    ]

    operations = [
        migrations.RunPython(scrub_stored_events, migrations.RunPython.noop),
    ]
