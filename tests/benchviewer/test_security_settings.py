"""Production settings pass Django's deployment checklist; every page carries a strict CSP."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from tests.builders import REPO

pytestmark = pytest.mark.django_db


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    env = {
        **os.environ,
        "PRODUCTION": "1",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "ALLOWED_HOSTS": "benchviewer.example.com",
        "DATA_DIR": str(tmp_path),
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set by the browser tests for Playwright, never in deployment
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_the_development_secret_key(tmp_path):
    env = {**os.environ, "PRODUCTION": "1", "DATA_DIR": str(tmp_path)}
    env.pop("SECRET_KEY", None)
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "SECRET_KEY" in result.stderr


def test_pages_send_a_content_security_policy_without_inline_script(client_logged_in):
    for url in ("/", "/trials/", "/imports/", "/accounts/login/"):
        policy = client_logged_in.get(url)["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
        assert directives["script-src"] == "'self'", url
        assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"


def test_api_docs_are_served_from_our_own_static_files(client_logged_in):
    html = client_logged_in.get("/api/docs/").content.decode()
    assert "cdn" not in html.lower() and "/static/drf_spectacular_sidecar/" in html
