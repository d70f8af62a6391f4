from celery import shared_task

from comparisons import services


@shared_task(acks_late=True)
def compute_comparison_task(comparison_id: int) -> None:
    """Compute and cache one comparison. Eager (in-process) when REDIS_URL is unset."""
    services.run_comparison(comparison_id)
