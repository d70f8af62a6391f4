from django.db import migrations, models


class Migration(migrations.Migration):
    """A later evidence-pack join or re-score changes updated_at: cached comparisons go stale."""

    dependencies = [("trials", "0006_step_text_indexed_after_import")]

    operations = [
        migrations.AddField(
            model_name="trial",
            name="updated_at",
            field=models.DateTimeField(auto_now=True),
        ),
    ]
