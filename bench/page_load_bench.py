"""The comparison page in a fresh browser: from navigation to every chart drawn.

Usage: .venv/bin/python bench/page_load_bench.py [--tasks 200] [--attempts 5] [--runs 10] [--port 8775]

Two configurations are written with bulk_create (compare_bench.create_trials) into a
temporary SQLite DATA_DIR; the comparison is computed once (cached, as a user finds it);
`manage.py runserver --nostatic` serves the app, so static files go through WhiteNoise as
in production (compressed when the browser accepts it). Each run opens a new browser
context (empty cache, the session cookie of a logged-in user) and times the page until
every chart in the first viewport has its SVG ("first screen complete"; charts below it are
drawn as they scroll near), then scrolls to each other chart in turn until every chart has
its SVG. It also reports plotly.js's bytes on the wire. Target: < 800 ms.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from browser import CHROMIUM, CHROMIUM_ARGS, refuse_port_in_use, wait_until_up
from compare_bench import create_trials  # this folder is on sys.path when run as a script
from database import environment, setup_django
from timing import p95

REPO = Path(__file__).resolve().parents[1]


# When each part ended, in ms from the navigation's start (the browser's own clock).
TIMINGS_JS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const out = [
    {name: "HTML received", ms: nav.responseEnd},
    {name: "DOMContentLoaded", ms: nav.domContentLoadedEventEnd},
  ];
  for (const m of performance.getEntriesByType("measure")) {
    out.push({name: m.name + " (duration)", ms: m.duration});
  }
  for (const r of performance.getEntriesByType("resource")) {
    const path = new URL(r.name).pathname;
    const name = path.includes("/charts/") ? "chart JSON " + path.split("/").slice(-2, -1)[0] : path;
    out.push({name: name, ms: r.responseEnd});
  }
  return out;
}"""


# The charts whose box meets the viewport as the page first shows it.
CHARTS_IN_VIEW_JS = """() => Array.from(document.querySelectorAll("[data-chart-url]"))
  .filter((el) => { const r = el.getBoundingClientRect(); return r.bottom > 0 && r.top < window.innerHeight; })
  .map((el) => el.id)"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--port", type=int, default=8775)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 tasks x 2 attempts, 1 run, 2 sides")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.attempts, args.runs = 20, 2, 1

    with tempfile.TemporaryDirectory(prefix="page-load-bench-") as data_dir:
        setup_django(data_dir)
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.test import Client
        from playwright.sync_api import sync_playwright

        from comparisons import services
        from comparisons.pair import charts
        from comparisons.statistics.sides import Side

        base_id, cand_id = create_trials(args.tasks, args.attempts)
        services.get_or_compute(Side("configuration", base_id), Side("configuration", cand_id))
        client = Client()
        client.force_login(get_user_model().objects.create_user("bench", password="bench-pw-1"))
        session = client.cookies[settings.SESSION_COOKIE_NAME].value

        refuse_port_in_use(args.port)
        env = {**environment(data_dir), "DEBUG": "0"}
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{args.port}", "--noreload", "--nostatic"],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base_url = f"http://127.0.0.1:{args.port}"
        try:
            wait_until_up(f"{base_url}/accounts/login/")
            url = f"{base_url}/comparisons/?baseline={base_id}&candidate={cand_id}"
            drawn, first_screen, loaded, plotly_bytes, in_view = [], [], [], [], []
            parts: dict[str, list[float]] = {}
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for run in range(args.runs + 1):  # the first run warms the server, not counted
                    context = browser.new_context(viewport={"width": 1440, "height": 900})
                    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": base_url}])
                    page = context.new_page()
                    finished: list = []
                    page.on("requestfinished", lambda request, finished=finished: finished.append(request))
                    start = time.perf_counter()
                    page.goto(url, wait_until="load")
                    load_ms = (time.perf_counter() - start) * 1000
                    first_view = page.evaluate(CHARTS_IN_VIEW_JS)
                    for chart_id in first_view:
                        page.wait_for_selector(f"#{chart_id} .main-svg", state="attached", timeout=30_000)
                    first_screen_ms = (time.perf_counter() - start) * 1000
                    for name in charts.CHARTS:
                        page.locator(f"#chart-{name}").scroll_into_view_if_needed()
                        page.wait_for_selector(f"#chart-{name} .main-svg", state="attached", timeout=30_000)
                    drawn_ms = (time.perf_counter() - start) * 1000
                    if run:
                        drawn.append(drawn_ms)
                        first_screen.append(first_screen_ms)
                        loaded.append(load_ms)
                        in_view.append(len(first_view))
                        for entry in page.evaluate(TIMINGS_JS):
                            parts.setdefault(entry["name"], []).append(entry["ms"])
                        plotly_bytes += [r.sizes()["responseBodySize"] for r in finished if "plotly" in r.url]
                    context.close()
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=10)

    trials = 2 * args.tasks * args.attempts
    print(f"{trials:,} trials, {args.runs} fresh browser contexts, 1440x900")
    print(f"charts in the first viewport: {min(in_view)}-{max(in_view)} of {len(charts.CHARTS)}")
    rows = (("page load event", loaded), ("first screen complete", first_screen), ("every chart, scrolled", drawn))
    for name, ms in rows:
        print(f"{name:<22} median {statistics.median(ms):7.1f} ms   p95 {p95(ms):7.1f} ms")
    for name, ms in parts.items():
        verb = "takes" if name.endswith("(duration)") else "ends at"
        print(f"  {name:<40} {verb:>7} median {statistics.median(ms):7.1f} ms")
    print(f"plotly.js on the wire: {max(plotly_bytes):,} bytes (encoded body)")


if __name__ == "__main__":
    main()
