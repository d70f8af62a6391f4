from django.apps import AppConfig


class TrialsConfig(AppConfig):
    name = "trials"
    verbose_name = "Trials"

    def ready(self) -> None:
        from trials import search  # noqa: F401  (connects its signal receiver)
