from celery import shared_task

from comparisons.cache import run_comparison


@shared_task(acks_late=True)
def compute_comparison_task(comparison_id: int) -> None:
    """Compute and cache one comparison. Eager (in-process) when REDIS_URL is unset."""
    run_comparison(comparison_id)
