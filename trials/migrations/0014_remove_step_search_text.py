"""A migration of its own, after 0013 has moved the text: PostgreSQL refuses to alter a table
in the transaction that wrote rows with deferred constraint checks pending."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("trials", "0013_step_text_table"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="step",
            name="search_text",
        ),
    ]
