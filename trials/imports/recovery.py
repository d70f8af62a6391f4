"""Finding imports that no worker is going to finish, and sending them again.

An import can be stranded two ways:

- **queued, but its message is gone**: Redis lost its data (restarted without persistence,
  failed over) or was down when the import was sent. Every message sent for an import
  leaves a marker key next to it in the broker's Redis, and the task deletes the marker
  when it starts. Queued for longer than `IMPORT_QUEUED_GRACE` with no marker means the
  message is gone: the marker lives and dies with the messages it stands for.
- **running, but its worker is gone**: SIGKILL, out of memory, a lost machine. A running
  import holds a PostgreSQL advisory lock, on a connection of its own, for as long as its
  worker lives; PostgreSQL releases it when that connection closes, however the worker
  died. Running with the lock free means nobody is working on it. SQLite has no such
  lock, and its workers share one machine, so there the lock is an exclusive `flock` on a
  file in `IMPORT_LOCK_DIR`, which the kernel releases when its process ends.

`trials.tasks.resend_stale_imports` sends both kinds again. It runs every
`IMPORT_RECOVERY_INTERVAL` seconds from Celery beat and from `manage.py requeue_imports`. Sending an import twice is
safe: the task skips a finished import and one that another worker holds, and the import
itself keys packs by content and trials by natural key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from core.broker import waiting_in_broker
from core.locks import unheld
from trials.models import Import

log = logging.getLogger(__name__)


FINISHED = (Import.Status.DONE, Import.Status.FAILED)


def sent_marker(import_id: str) -> str:
    """The broker key that says a message for this import is waiting (core/broker.py)."""
    return f"import-sent:{import_id}"


@dataclass(frozen=True)
class Requeued:
    import_id: str
    reason: str


def stale_imports() -> list[Requeued]:
    """Queued imports whose message is gone and running imports whose worker is gone."""
    now = timezone.now()
    stale = []
    queued = Import.objects.filter(
        status=Import.Status.QUEUED, created_at__lt=now - timedelta(seconds=settings.IMPORT_QUEUED_GRACE)
    )
    for import_id in queued.values_list("pk", flat=True):
        if not waiting_in_broker(sent_marker(str(import_id))):
            stale.append(Requeued(str(import_id), "queued, but no message for it is waiting in the broker"))
    running = [str(pk) for pk in Import.objects.filter(status=Import.Status.RUNNING).values_list("pk", flat=True)]
    stale.extend(Requeued(import_id, "running, but no worker holds it") for import_id in unheld(running))
    return stale
