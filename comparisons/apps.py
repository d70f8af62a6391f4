"""The comparisons app."""

from django.apps import AppConfig


class ComparisonsConfig(AppConfig):
    name = "comparisons"
    verbose_name = "Comparisons"
