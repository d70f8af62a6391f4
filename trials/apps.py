"""The trials app: at start, the recursion limit deep JSON needs, and the modules that connect signals."""

import sys

from django.apps import AppConfig
from django.core.signals import request_started

# orjson reads JSON nested up to 1,024 levels but writes only 255, so deeper values (an
# agent's `extra`, say) go through the standard library's encoder, and through our own
# walks over JSON, which take a frame or two a level: Python's default of 1,000 is short.
RECURSION_LIMIT = 4_000


class TrialsConfig(AppConfig):
    name = "trials"
    verbose_name = "Trials"

    def ready(self) -> None:
        sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
        from trials import (
            queue,
            search,  # noqa: F401  (search connects its signal receivers)
        )

        request_started.connect(queue.start_embedded_worker, dispatch_uid="trials.embedded_worker")
