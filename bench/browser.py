"""What the bench scripts that drive a browser against a server of their own share."""

from __future__ import annotations

import socket
import time
import urllib.request

# Debian's Chromium, as the tests launch it (tests/conftest.py): a bench script imports no tests.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def refuse_port_in_use(port: int) -> None:
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            raise SystemExit(f"port {port} is in use: pick another with --port")


def wait_until_up(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)  # noqa: S310 (our own local server)
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the server did not answer at {url}")
