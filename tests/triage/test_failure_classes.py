"""The failure-class table: known answers for each source's way of saying how a trial ended."""

import re

import pytest

from tests.builders import REPO
from trials.models.failure_classes import RULES, FailureClass, FailureFacts, classify

INFRA, TASK, AGENT = FailureClass.INFRASTRUCTURE, FailureClass.TASK_QUALITY, FailureClass.CAPABILITY


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (FailureFacts("errored", exception_type="EnvironmentStartTimeoutError"), INFRA),
        (FailureFacts("errored", exception_type="DaytonaError"), INFRA),
        (FailureFacts("errored", exception_type="RuntimeError", exception_message="Container OOMKilled"), INFRA),
        (
            FailureFacts(
                "failed", exception_type="RuntimeError", exception_message="runner exited with code 137 (OOM?)"
            ),
            INFRA,
        ),
        (FailureFacts("failed", exception_message="the room was empty"), AGENT),  # "oom" only as a word's start
        (FailureFacts("errored", exception_type="AuthenticationError"), INFRA),
        (FailureFacts("errored", exception_message="Error code: 401 - invalid api key"), INFRA),
        (FailureFacts("timeout", exception_type="VerifierTimeoutError"), INFRA),
        (FailureFacts("errored", exception_type="RewardFileNotFoundError"), INFRA),
        (FailureFacts("unknown", failure_mode="test_timeout"), INFRA),
        (FailureFacts("unknown", failure_mode="parse_error"), INFRA),
        (FailureFacts("failed", failure_category="environment"), INFRA),
        (FailureFacts("failed", task_flagged=True, exception_type="DockerError"), TASK),
        (FailureFacts("failed", failure_category="task-quality"), TASK),
        (FailureFacts("timeout", exception_type="AgentTimeoutError"), AGENT),
        (FailureFacts("errored", exception_type="NonZeroAgentExitCodeError"), AGENT),
        (FailureFacts("failed", failure_mode="agent_timeout"), AGENT),
        (FailureFacts("unknown", failure_mode="unknown_agent_error"), AGENT),
        (FailureFacts("failed", limit="token"), AGENT),
        (FailureFacts("failed"), AGENT),
        (FailureFacts("errored", exception_type="ValueError", exception_message="bad tool arguments"), AGENT),
    ],
)
def test_each_source_s_way_of_failing_gets_its_class(facts, expected):
    failure_class, why = classify(facts)
    assert failure_class == expected
    assert why


@pytest.mark.parametrize(
    "facts",
    [
        FailureFacts("passed"),
        FailureFacts("passed", exception_type="AgentTimeoutError"),  # a pass is a pass, however it ended
        FailureFacts("unknown", failure_mode="unset"),
        FailureFacts("skipped"),
        FailureFacts("running"),
    ],
)
def test_a_trial_that_did_not_fail_has_no_class(facts):
    assert classify(facts) == (None, "")


def test_the_docs_list_every_rule_in_order():
    page = (REPO / "docs" / "failure-classes.md").read_text()
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \| .+? \| (\w+) \| (.+?) \|$", page, re.MULTILINE)
    assert [(field, cls, why) for _, field, cls, why in rows] == [
        (rule.field, rule.failure_class.value, rule.why) for rule in RULES
    ]
