"""The Celery app: configured from the settings' `CELERY_*` names, tasks found in each app."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchviewer.settings")

app = Celery("benchviewer")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
