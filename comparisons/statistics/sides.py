"""What a side of a comparison is, and which two sides a request names.

A side is every trial of a configuration or of a job (`Side`); `parse_sides` reads the
baseline and candidate from query parameters, a form or a JSON body.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.urls import reverse

from comparisons.models import SideKind
from core.ids import parse_pk
from trials.models import Configuration, Job, Trial
from trials.reading.text import isolated


@dataclass(frozen=True)
class Side:
    """One side of a comparison: every trial of a configuration, or of a job."""

    kind: str
    id: int

    def trials(self) -> QuerySet[Trial]:
        if self.kind == SideKind.JOB:
            return Trial.objects.filter(job_id=self.id)
        return Trial.objects.filter(configuration_id=self.id)

    def query(self, role: str) -> dict[str, int]:
        """The API/page parameters that select this side (`baseline=3` or `baseline_job=3`)."""
        return {role if self.kind == SideKind.CONFIGURATION else f"{role}_job": self.id}

    def trials_url(self, **filters: Any) -> str:
        params = {self.kind: self.id, **{k: v for k, v in filters.items() if v not in (None, "")}}
        return f"{reverse('trial-list')}?{urlencode(params, doseq=True)}"

    def label(self) -> str:
        if self.kind == SideKind.JOB:
            job = Job.objects.filter(pk=self.id).values_list("name", flat=True).first()
            return f"job {isolated(job)} #{self.id}" if job else f"job #{self.id}"  # job names repeat; ids do not
        key = Configuration.objects.filter(pk=self.id).values_list("key", flat=True).first()
        return isolated(key) if key else f"configuration #{self.id}"


def trials_of(sides: Iterable[Side]) -> QuerySet[Trial]:
    """Every trial of these sides, one query (what a page's pass threshold is stated over)."""
    return reduce(or_, (side.trials() for side in sides), Trial.objects.none())


class SideError(ValueError):
    """The request does not name a baseline and a candidate that exist."""


def parse_sides(params: Any) -> tuple[Side, Side]:
    """Read `baseline` / `candidate` (configuration ids) or `baseline_job` / `candidate_job`.

    `params`: query parameters, a form, or a JSON body (where ids may be numbers).
    """
    if not hasattr(params, "get"):
        raise SideError("send the sides as query parameters or a JSON object, not " + type(params).__name__)
    sides = []
    for role in ("baseline", "candidate"):
        side = _parse_side(params, role)
        if side is None:
            raise SideError(f"choose a {role}: ?{role}=<configuration id> or ?{role}_job=<job id>")
        sides.append(side)
    return sides[0], sides[1]


def _parse_side(params: Any, role: str) -> Side | None:
    for kind, name, model in ((SideKind.CONFIGURATION, role, Configuration), (SideKind.JOB, f"{role}_job", Job)):
        value = params.get(name)
        value = str(value).strip() if value is not None and not isinstance(value, (bool, list, dict)) else ""
        if not value:
            continue
        pk = parse_pk(value)
        if pk is None or not model.objects.filter(pk=pk).exists():
            raise SideError(f"{name}={value!r} is not a known {kind} id")
        return Side(kind, pk)
    return None
