"""The trial list names each configuration whole enough to tell it apart (issue 39): on the real TB1 runs a
configuration is its submission folder, `<date>_<agent>_<model>` (docs/importing.md), and the list's cell
kept only its ends ("202508…de-4-sonnet"), the agent lost. It now shows the name on two lines, its agent and
model both there. Known answers are the submission folders' own names."""

from __future__ import annotations

import html
import re

import pytest

from tests.builders import REFERENCE, import_path

pytestmark = pytest.mark.django_db

SUBMISSIONS = [
    REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet",
    *sorted((REFERENCE / "public-runs-2" / "tb1-droid-5x2").iterdir()),
]
CELL = re.compile(r'<td class="name-cut" title="([^"]*)"><span class="two-lines">(.*?)</span>')


def shown(cell: str) -> str:
    """What a person reads in the cell: its text, the line break (<wbr>) joining nothing."""
    return html.unescape(re.sub(r"<[^>]+>", "", cell))


def test_each_configuration_reads_whole_with_its_agent_and_model(client_logged_in):
    for submission in SUBMISSIONS:
        import_path(submission)
    texts = {}
    for submission in SUBMISSIONS:
        name = submission.name
        _, agent, model = name.split("_", 2)
        page = client_logged_in.get("/trials/", {"configuration": name}).content.decode()
        cells = CELL.findall(page)
        assert len(cells) == 50, name  # a full first page, every row of this configuration
        assert {title for title, _ in cells} == {name}
        [text] = {shown(cell) for _, cell in cells}
        assert agent in text and model in text, (name, text)
        assert text == name  # (at most 40 characters: both lines whole)
        texts[name] = text
    assert len(set(texts.values())) == len(SUBMISSIONS) == 3
