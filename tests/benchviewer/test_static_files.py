"""The app serves its own static files with DEBUG off, as `make demo` runs it: no CDN, no collectstatic."""

from __future__ import annotations

import pytest
from django.conf import settings

pytestmark = pytest.mark.sqlite_only("no database: static files are served by WhiteNoise, before any view")


@pytest.mark.parametrize("path", ["js/import_progress.js", "plotly/plotly-benchviewer.min.js", "favicon.svg"])
def test_static_files_are_served_with_debug_off_and_no_login(client, path):
    assert not settings.DEBUG
    response = client.get(f"/static/{path}")
    assert response.status_code == 200
    assert b"".join(response.streaming_content)  # the file itself, not a login page


@pytest.mark.parametrize("encoding", ["br", "gzip"])
def test_plotly_js_is_sent_compressed_and_under_1_5_mb_on_the_wire(client, encoding):
    response = client.get("/static/plotly/plotly-benchviewer.min.js", headers={"accept-encoding": encoding})
    body = b"".join(response.streaming_content)
    assert response.status_code == 200
    assert response["Content-Encoding"] == encoding
    assert len(body) <= 1_500_000
    assert response["Vary"] == "Accept-Encoding"
