"""A user's saved queries of the trials query language (trials/query.py): a name, the query, a link.

Each belongs to one user and changes nothing anyone else sees, so a viewer may keep their own
(core/roles.py lets these writes through). The views are in trials/queries/.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.db import models
from django.urls import reverse

from trials.storage.fields import CharField, TextField

__all__ = ["SavedQuery"]


class SavedQuery(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_queries")
    name = CharField(max_length=100)
    query = TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="unique_saved_query_name")]
        verbose_name_plural = "saved queries"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        """The trial list of this query."""
        return f"{reverse('trial-list')}?{urlencode({'q': self.query})}"
