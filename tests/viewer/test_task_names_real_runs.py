"""Tasks named with their dataset on the shared Inspect log, whose sample ids are bare numbers, and the
dashboard's jobs named by agent · model, as the job list names them."""

from __future__ import annotations

import json
import re
import zipfile

import pytest

from tests.builders import REFERENCE, import_path
from trials import search
from trials.models import Trial

pytestmark = pytest.mark.django_db

DOCENT = REFERENCE / "public-runs-2" / "docent-sample-eval" / "log.eval"


@pytest.fixture
def header():
    import_path(DOCENT.parent)
    with zipfile.ZipFile(DOCENT) as log:
        return json.loads(log.read("header.json"))["eval"]


def _label(html: str, task: str) -> str:
    """The task label naming `task` (its title holds the task and its dataset)."""
    found = re.search(
        rf'<span class="task-label" title="{task} · ([^"]+)">{task} <span class="muted task-dataset">· ([^<]+)</span>',
        html,
    )
    assert found
    return found.group(1)


def test_an_inspect_sample_is_named_with_its_dataset_on_its_page_the_dashboard_and_search(client_logged_in, header):
    dataset = header["task"]  # the log's task is the dataset its samples are drawn from
    trial = Trial.objects.get(task__name="56")
    assert _label(client_logged_in.get(trial.get_absolute_url()).content.decode(), "56").startswith(dataset)
    home = client_logged_in.get("/").content.decode()
    untriaged = home[home.index('id="untriaged"') :]
    assert _label(untriaged, "56").startswith(dataset)
    assert "· luce_intercode_ctf" in untriaged  # cut to fit, the dataset's own name stays
    search.index_pending()
    with zipfile.ZipFile(DOCENT) as log:
        sample = json.loads(log.read("samples/56_epoch_1.json"))
    word = next(
        w
        for w in re.findall(
            r"[a-z]{6,}",
            sample["messages"][-1]["content"] if isinstance(sample["messages"][-1]["content"], str) else "",
        )
    )
    hits = client_logged_in.get("/search/", {"q": word, "task": "56"}).content.decode()
    assert _label(hits, "56").startswith(dataset)


def test_the_dashboard_names_each_jobs_agent_and_model(client_logged_in, header):
    home = client_logged_in.get("/").content.decode()
    card = home[home.index("<h2>Jobs ") : home.index('id="all-jobs"')]
    assert "<th>Agent · model</th>" in card and "<th>Format</th>" not in card
    cell = re.search(r'<td class="job-agents">(.*?)</td>', card, re.S).group(1)
    assert f"· {header['model']}" in cell


def test_a_long_inspect_configuration_keeps_its_model_in_the_trial_list_and_search(client_logged_in, header):
    model = header["model"]  # the key holds it after the format's prefix, then the solver chain
    listed = client_logged_in.get("/trials/").content.decode()
    cells = [
        (key, re.sub(r"<[^>]+>", "", text))  # (its two lines, as read)
        for key, text in re.findall(
            r'<td class="name-cut" title="(inspect:[^"]+)"><span class="two-lines">(.*?)</span>', listed
        )
    ]
    assert cells and all(model in key and text.startswith(model) and len(text) < len(key) for key, text in cells)
    search.index_pending()
    hits = client_logged_in.get("/search/", {"q": "flag"}).content.decode()
    shown = re.findall(r'\?configuration=\d+" title="([^"]+)">([^<]+)</a>', hits)
    assert shown and all(text.startswith(model) and len(text) <= 37 < len(key) for key, text in shown)
