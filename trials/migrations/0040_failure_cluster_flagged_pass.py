from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("trials", "0039_dataset_pass_reward"),
    ]

    operations = [
        migrations.AlterField(
            model_name="failurecluster",
            name="failure_class",
            field=models.CharField(
                choices=[
                    ("infrastructure", "Infrastructure"),
                    ("task_quality", "Task quality"),
                    ("capability", "Capability"),
                    ("safety", "Safety"),
                    ("flagged_pass", "Flagged pass"),
                ],
                default="capability",
                max_length=20,
            ),
        ),
    ]
