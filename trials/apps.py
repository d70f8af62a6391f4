from django.apps import AppConfig
from django.core.signals import request_started


class TrialsConfig(AppConfig):
    name = "trials"
    verbose_name = "Trials"

    def ready(self) -> None:
        from trials import search, services  # noqa: F401  (search connects its signal receiver)

        request_started.connect(services.start_embedded_worker, dispatch_uid="trials.embedded_worker")
