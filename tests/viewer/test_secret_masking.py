"""The secret masker (trials.reading.text.scrub) rewrites whole tokens in known key formats, and
nothing else: no name, path or id of the reference packs or of the demo is altered."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import REFERENCE
from trials.demo import SECRET, write_demo
from trials.ingest.formats.detect import discover, parse_candidate
from trials.reading.text import REDACTED, scrub

pytestmark = pytest.mark.sqlite_only("no database: the masker is a function on text")

KEYS = {
    "OpenAI project key": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAB7CD0efGh1IjK2lMn3oPq4",
    "OpenAI key": "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",
    "Anthropic key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefghijklmnopqrstuvwxyzAB-CDEFGHAA",
    "AWS access key id": "AKIAIOSFODNN7EXAMPLE",
    "GitHub token": "ghp_1234567890abcdefghijklmnopqrstuvwxyz",
    "GitHub OAuth token": "gho_16C7e42F292c6912E7710c838347Ae178B4a",
    "GitHub fine-grained token": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
    "Slack bot token": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "Google API key": "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
    "Stripe live key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "JSON Web Token": (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    ),
    "the demo's secret": SECRET,
}


def names_in(folder: Path) -> set[str]:
    """Every file path under `folder`, and every job, trial and task name its packs hold."""
    names = {str(path.relative_to(folder)) for path in folder.rglob("*")}
    for candidate in discover(folder, folder.name):
        if candidate.kind in ("skipped", "archive"):
            continue
        try:
            pack = parse_candidate(candidate)
        except Exception:  # a sample that is not a pack at all is still a file name, above
            continue
        names |= {job.name for job in pack.jobs} | {job.key for job in pack.jobs}
        for trial in pack.iter_trials():
            names |= {trial.name, trial.key, *trial.files}
            names |= {trial.task.name} if trial.task else set()
            names |= {trial.configuration.key} if trial.configuration else set()
    return names


def test_no_name_path_or_id_of_the_reference_packs_is_altered():
    names = names_in(REFERENCE)
    assert len(names) > 100
    assert {name: scrub(name) for name in names if scrub(name) != name} == {}


def test_no_name_path_or_id_of_the_demo_is_altered(tmp_path):
    write_demo(tmp_path / "demo")
    names = names_in(tmp_path / "demo")
    assert len(names) > 100
    assert {name: scrub(name) for name in names if scrub(name) != name} == {}


ORDINARY = [
    "flask-add-rate-limit__MmeBi3n",
    "codex-subscription-3task-extension-v2",
    "sk-learn-regression-task-number-one",
    "ask-AKIAIOSFODNN7EXAMPLE",
    "path/to/risk-assessment-Task-2024-final",
]


@pytest.mark.parametrize("name", ORDINARY)
def test_ordinary_names_that_hold_a_key_prefix_are_not_masked(name):
    assert scrub(name) == name


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_a_real_key_shape_is_masked_whole_wherever_it_stands(kind):
    key = KEYS[kind]
    for text in (key, f"export API_KEY={key}\n", f'{{"token": "{key}"}}', f"/tmp/{key}/file"):
        masked = scrub(text)
        assert key not in masked and REDACTED in masked
        assert masked == text.replace(key, REDACTED)  # only the key: what stands around it is kept


def test_a_bearer_token_and_a_private_key_block_are_masked_and_the_header_name_kept():
    assert scrub("Authorization: Bearer abc.def-ghi_jkl") == f"Authorization: Bearer {REDACTED}"
    assert scrub('{"Authorization": "Bearer 0123456789abcdef"}') == f'{{"Authorization": "Bearer {REDACTED}"}}'
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
    assert scrub(f"key:\n{block}\ndone") == f"key:\n{REDACTED}\ndone"
