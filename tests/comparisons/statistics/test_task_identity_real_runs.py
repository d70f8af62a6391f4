"""A task is its dataset and its name (issue 39, Must 1), on two real Inspect logs whose samples
are both numbered: sample 56 of the Docent CTF log and sample 56 of the theory-of-mind log are two tasks."""

from __future__ import annotations

import re
import zipfile

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Trial

DOCENT = REFERENCE / "public-runs-2" / "docent-sample-eval" / "log.eval"
[THEORY] = sorted((REFERENCE / "inspect").glob("*theory-of-mind*.eval"))


def sample_ids(log) -> set[str]:
    """The sample ids a `.eval` holds, read from its members' names (`samples/<id>_epoch_<n>.json`)."""
    with zipfile.ZipFile(log) as z:
        return {m.group(1) for n in z.namelist() if (m := re.fullmatch(r"samples/(.+)_epoch_\d+\.json", n))}


@pytest.fixture
def two_logs(db):
    import_path(DOCENT)
    import_path(THEORY)
    docent = Trial.objects.filter(key__startswith="inspect:", name="56_epoch_1", dataset__name__contains="ctf")
    theory = Trial.objects.filter(key__startswith="inspect:", name="56_epoch_1", dataset__name__contains="theory")
    return docent.get(), theory.get()


def test_both_logs_number_a_sample_56():
    assert "56" in sample_ids(DOCENT) and "56" in sample_ids(THEORY)


def test_sample_56_of_one_log_is_never_offered_beside_the_other(client_logged_in, two_logs):
    docent, theory = two_logs
    page = client_logged_in.get(f"/trials/{docent.pk}/").content.decode()
    assert f"/trials/{docent.pk}/side-by-side/{theory.pk}/" not in page
    response = client_logged_in.get(f"/api/trials/{docent.pk}/align/{theory.pk}/")
    assert response.status_code == 400
    assert "not of the same task" in response.json()["trials"][0]
    page = client_logged_in.get(f"/trials/{docent.pk}/side-by-side/{theory.pk}/").content.decode()
    assert 'id="not-comparable"' in page


def test_comparing_the_two_logs_pairs_none_and_says_their_datasets_differ(client_logged_in, two_logs):
    docent, theory = two_logs
    shared = sample_ids(DOCENT) & sample_ids(THEORY)
    assert shared  # the logs share sample numbers (the known answer, from the raw files)
    url = f"/api/comparisons/?baseline={docent.configuration_id}&candidate={theory.configuration_id}"
    body = client_logged_in.get(url).json()
    comparison = body["comparison"]
    assert comparison["pairedTasks"] == 0
    assert {u["task"] for u in comparison["unpairedAcrossDatasets"]} == shared
    assert all(r["baseline"] is None or r["candidate"] is None for r in body["tasks"])
    page = client_logged_in.get(
        f"/comparisons/?baseline={docent.configuration_id}&candidate={theory.configuration_id}"
    ).content.decode()
    assert f"{len(shared)} tasks could not be paired: their datasets differ." in page
