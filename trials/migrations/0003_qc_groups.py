"""The four role groups of the triage issue (rights per group: trials/triage/roles.py)."""

from django.db import migrations

GROUPS = ("reviewer", "triager", "approver", "viewer")


def create_groups(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in GROUPS:
        Group.objects.get_or_create(name=name)


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=GROUPS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("trials", "0002_qc_triage"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
