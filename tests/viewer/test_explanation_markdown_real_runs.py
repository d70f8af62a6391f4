"""A grader's explanation reads as the Markdown it is written in (issue 39): on the real Inspect logs the
`model_graded_fact` and `includes` scorers explain in Markdown (`**Conclusion**:`, `- ` lists, `` `flag.png` ``),
which the verifier tab showed as raw asterisks. It now renders a safe subset: escaped first, only a few
attribute-free tags out. Known answers are read from the logs' own samples."""

from __future__ import annotations

import json
import re
import zipfile

import pytest
from django.utils.html import escape  # (as a page escapes any text: & < > " ')

from tests.builders import REFERENCE, XSS, import_path
from trials.reading import markdown_text

pytestmark = pytest.mark.django_db

LOGS = {
    "theory_of_mind": REFERENCE / "inspect" / "2025-09-23T08-09-58-04-00_theory-of-mind_bbB4eRCx2rFJLyPH42Cj9r.eval",
    "luce_intercode_ctf": REFERENCE / "public-runs-2" / "docent-sample-eval" / "log.eval",
}
ALLOWED = {"p", "br", "strong", "em", "code", "pre", "ul", "ol", "li"}
CELL = re.compile(r'<td class="explanation">(.*?)</td>', re.S)
TRIAL_LINK = re.compile(r'<a class="trial-link" href="(/trials/\d+/)[^"]*">([^<]+)</a>')


def explained(log) -> dict[str, str]:
    """{sample name: its first scorer's explanation} of the samples whose explanation holds Markdown."""
    found = {}
    with zipfile.ZipFile(log) as z:
        for name in z.namelist():
            if name.startswith("samples/"):
                sample = json.loads(z.read(name))
                text = next(iter(sample["scores"].values())).get("explanation") or ""
                if "**" in text or "`" in text or "\n- " in text:
                    found[f"{sample['id']}_epoch_{sample['epoch']}"] = text
    return found


def trial_links(client, job: str, number: int) -> list[tuple[str, str]]:
    """(href, name) of the trials on page `number` of the job's trial list (none past its last page)."""
    page = client.get(f"/trials/?job={job}&page={number}")
    return TRIAL_LINK.findall(page.content.decode()) if page.context["page"].number == number else []


def test_a_graders_markdown_explanation_reads_as_formatted_text(client_logged_in):
    for log in LOGS.values():
        import_path(log)
    checked = 0
    for job, log in LOGS.items():
        wanted = explained(log)
        assert wanted
        pages = {name: href for number in (1, 2, 3) for href, name in trial_links(client_logged_in, job, number)}
        for name, text in sorted(wanted.items())[:12]:
            page = client_logged_in.get(f"{pages[name]}?tab=verifier").content.decode()
            [cell] = CELL.findall(page)
            assert set(re.findall(r"</?([a-z]+)[ >]", cell)) <= ALLOWED, cell
            code = re.findall(r"`([^`]+)`", text)
            for phrase in re.findall(r"\*\*(.+?)\*\*", re.sub(r"`[^`]+`", "", text)):
                assert f"<strong>{escape(phrase)}</strong>" in cell, phrase
            for span in code:
                assert f"<code>{escape(span.strip())}</code>" in cell, span
            assert "**" not in re.sub(r"<code>.*?</code>", "", cell)
            if "\n- " in text:
                assert "<ul><li>" in cell
            checked += 1
    assert checked >= 10


def test_raw_html_in_an_explanation_stays_text():
    rendered = markdown_text.render(f"**{XSS}** and `{XSS}`\n\n- {XSS}")
    assert "<img" not in rendered and "<script" not in rendered
    assert set(re.findall(r"</?([a-z]+)[ >]", rendered)) <= ALLOWED
