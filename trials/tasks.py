from celery import shared_task

from trials import services


@shared_task(acks_late=True, autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5)
def import_pack_task(import_id: str) -> None:
    services.run_import(import_id)
