"""The API's pages: DRF's, but `?page=` is read as the schema says, a whole number from 1."""

from __future__ import annotations

from typing import Any

from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from core.ids import parse_pk


class PageNumberPagination(pagination.PageNumberPagination):
    def get_page_number(self, request: Request, paginator: Any) -> Any:
        """An empty or non-numeric `?page=` is refused (400), not read as page 1."""
        value = request.query_params.get(self.page_query_param)
        if value is None:
            return 1
        number = parse_pk(value)
        if number is None or number < 1:
            raise ValidationError({self.page_query_param: [f"a whole number from 1, not {value!r}"]})
        return number
