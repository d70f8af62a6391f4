"""A migration of its own, after 0011 has moved the bodies: PostgreSQL refuses to alter a table
in the transaction that updated rows with deferred constraint checks pending."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("trials", "0011_step_bodies_in_blobs"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="step",
            name="raw_json",
        ),
    ]
