"""The app serves its own static files with DEBUG off, as `make demo` runs it: no CDN, no collectstatic."""

from __future__ import annotations

import pytest
from django.conf import settings

pytestmark = pytest.mark.sqlite_only("no database: static files are served by WhiteNoise, before any view")


@pytest.mark.parametrize("path", ["js/import_progress.js", "plotly/plotly.min.js", "favicon.svg"])
def test_static_files_are_served_with_debug_off_and_no_login(client, path):
    assert not settings.DEBUG
    response = client.get(f"/static/{path}")
    assert response.status_code == 200
    assert b"".join(response.streaming_content)  # the file itself, not a login page
