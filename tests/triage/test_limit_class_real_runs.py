"""Inspect samples cut off by a limit, on Docent's real CTF log (public-runs-2 README, pack 7: samples 56, 78
and 86 end with a `sample_limit` event, "errored-like, not a plain failure"): their cause names the limit
on the API the trial page reads and in their cluster's title, and they read errored. Known answers are read
from the .eval itself."""

from __future__ import annotations

import json
import re
import zipfile

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Trial

LOG = REFERENCE / "public-runs-2" / "docent-sample-eval" / "log.eval"


def limited_samples() -> dict[str, str]:
    """{sample id: the kind of limit its sample_limit event names}."""
    found = {}
    with zipfile.ZipFile(LOG) as log:
        for name in log.namelist():
            if name.startswith("samples/"):
                sample = json.loads(log.read(name))
                for event in sample.get("events", []):
                    if event.get("event") == "sample_limit":
                        found[str(sample["id"])] = event["type"]
    return found


@pytest.mark.django_db
def test_a_sample_that_hit_its_message_limit_reads_so(client_logged_in):
    limited = limited_samples()
    assert set(limited) == {"56", "78", "86"}  # the README's known answer, in the file itself
    import_path(LOG)
    for sample_id, kind in limited.items():
        trial = Trial.objects.get(name=f"{sample_id}_epoch_1")
        shown = client_logged_in.get(f"/api/trials/{trial.pk}/").json()
        assert shown["failure_class_why"] == f"hit the {kind} limit", shown
        assert shown["status"] == "errored"  # errored-like, not a plain failure (none of the three scored C)
        listing = client_logged_in.get("/qc/clusters/").content.decode()
        titles = dict(
            re.findall(
                r'<a href="/qc/clusters/(\d+)/">C-\d+</a>.*?class="cluster-title" title="([^"]*)"', listing, re.S
            )
        )
        assert "limit" in titles[str(trial.cluster_id)]
    others = Trial.objects.filter(status__in=Trial.FAILED_STATUSES).exclude(name__in=[f"{i}_epoch_1" for i in limited])
    assert others.exists()
    for trial in others:  # a plain wrong answer names no limit
        assert "limit" not in client_logged_in.get(f"/api/trials/{trial.pk}/").json()["failure_class_why"]
