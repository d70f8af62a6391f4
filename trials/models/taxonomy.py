"""The failure taxonomy a triager files against: seed 000's categories and finer codes.

Categories are the six of seed 000 question 5. Codes are the seed's own
(tool-result-missing, stream-stuck, permission-bypass, stale-success) plus OpenChrome's
real-world failureCategory values (formats-seeds §3.4).

OpenChrome's planning/navigation/grounding/extraction/form-entry codes are failures of
the agent deciding what to do on a page. Planning and grounding (choosing steps,
picking the element that matches an instruction) are model behaviour; navigation,
extraction and form-entry happen through what the GUI projects to the agent (the DOM
or accessibility tree, the page state), so they default to "gui-projection". A triager
can always pick another category: this is only the pre-fill.
"""

from __future__ import annotations

from django.db import models


class Category(models.TextChoices):
    RUNTIME = "runtime", "Runtime"
    MODEL = "model", "Model"
    TOOL = "tool", "Tool"
    GUI_PROJECTION = "gui-projection", "GUI projection"
    ENVIRONMENT = "environment", "Environment"
    VERIFIER = "verifier", "Verifier"


# code -> the category it belongs to by default
CODE_CATEGORY: dict[str, str] = {
    "tool-result-missing": Category.TOOL,
    "stream-stuck": Category.RUNTIME,
    "permission-bypass": Category.RUNTIME,
    "stale-success": Category.VERIFIER,
    "planning": Category.MODEL,
    "navigation": Category.GUI_PROJECTION,
    "grounding": Category.MODEL,
    "extraction": Category.GUI_PROJECTION,
    "form-entry": Category.GUI_PROJECTION,
    "auth-state": Category.ENVIRONMENT,
    "timeout": Category.RUNTIME,
    "infrastructure": Category.ENVIRONMENT,
}
CODE_CHOICES = [(code, code) for code in CODE_CATEGORY]

# Aliases seen in real packs (snake_case fixtures, Harbor exception names).
CODE_ALIASES = {
    "tool_failed": "tool-result-missing",
    "tool_result_missing": "tool-result-missing",
    "stream_stuck": "stream-stuck",
    "permission_bypass": "permission-bypass",
    "stale_success": "stale-success",
    "form_entry": "form-entry",
    "auth_state": "auth-state",
}
NOT_A_FAILURE = {"", "none", "null", "passed", "ok"}


def normalise_code(value: str | None) -> str:
    """A known finer code for `value`, or "" when it names none."""
    text = (value or "").strip().lower()
    text = CODE_ALIASES.get(text, text)
    return text if text in CODE_CATEGORY else ""


def category_for(value: str | None) -> str:
    """The category of a code or category name, or "" when neither is known."""
    text = (value or "").strip().lower().replace("_", "-").replace(" ", "-")
    if text in Category.values:
        return text
    if text == "gui":
        return Category.GUI_PROJECTION
    code = normalise_code(value)
    return CODE_CATEGORY.get(code, "")


def category_from_exception(exception_type: str | None) -> str:
    """Harbor exception class names -> category (VerifierTimeoutError is a verifier problem)."""
    name = (exception_type or "").lower()
    if not name:
        return ""
    if name.startswith(("verifier", "reward")) or "verifier" in name or "reward" in name:
        return Category.VERIFIER
    if "timeout" in name:
        return Category.RUNTIME
    if any(word in name for word in ("docker", "environment", "container", "sandbox", "network")):
        return Category.ENVIRONMENT
    if "tool" in name:
        return Category.TOOL
    if any(word in name for word in ("model", "llm", "context", "token", "ratelimit", "rate_limit")):
        return Category.MODEL
    return Category.RUNTIME


# Safety flags: each one makes its trial a failure to triage, whatever its reward.
SIDE_EFFECT_AFTER_DENIAL = "side-effect-after-denial"
PERMISSION_BYPASS = "permission-bypass"
STALE_SUCCESS = "stale-success"
# `<how it ended>-with-reward`: a trial that did not end normally yet holds a reward (stale or partial).
ERRORED_WITH_REWARD = "errored-with-reward"
TIMEOUT_WITH_REWARD = "timeout-with-reward"
CANCELLED_WITH_REWARD = "cancelled-with-reward"
LIMIT_WITH_REWARD = "limit-with-reward"
WITH_REWARD = {
    "errored": ERRORED_WITH_REWARD,
    "timeout": TIMEOUT_WITH_REWARD,
    "cancelled": CANCELLED_WITH_REWARD,
    "limit": LIMIT_WITH_REWARD,
}
WITH_REWARD_FLAG = "with-reward"  # the trials list's filter for any of them
SAFETY_SIGNALS = frozenset({"side-effect-after-denial", "permission-bypass", "stale-success"})
FLAG_LABELS = {
    SIDE_EFFECT_AFTER_DENIAL: "a side effect after a denied permission",
    PERMISSION_BYPASS: "a permission-bypass event",
    STALE_SUCCESS: "a stale success",
    ERRORED_WITH_REWARD: "an errored trial that still has a reward",
    TIMEOUT_WITH_REWARD: "a timed-out trial that still has a reward",
    CANCELLED_WITH_REWARD: "a cancelled trial that still has a reward",
    LIMIT_WITH_REWARD: "a trial stopped by a limit that still has a reward",
}
FLAG_CHOICES = [(flag, label) for flag, label in FLAG_LABELS.items()]
