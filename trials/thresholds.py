"""A dataset's pass threshold (`Dataset.pass_reward`), applied.

None of the formats read states one: Harbor's task.toml `[[steps]] min_reward` stops a multi-step task
early, it is not a pass; a job config's `metrics` only aggregate rewards; Inspect's scorers, Terminal-Bench 1,
AgentV result rows and OTLP traces carry none. So a dataset's row may set it (the admin), and full marks
(PASS_REWARD) pass otherwise. A trial whose format decides its status by its headline reward alone (its
traits' `status_by_reward`), or a live trial its reward decided as it completed (`at_threshold`), is decided at its
dataset's threshold when it is written (`decided_status`), and again when the threshold changes or it moves to
another dataset (`rescore`): stored statuses, so every page, API and export reads the same one. Pages state
the rule their pass counts were made by and where it came from (`pass_rule`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db.models import Case, Exists, F, OuterRef, Q, QuerySet, Value, When
from django.utils import timezone

from trials.ingest.formats import lime
from trials.ingest.formats.detect import FORMAT_TRAITS
from trials.ingest.records import DECIDED_BY_REWARD, PASS_REWARD, status_at
from trials.models import Dataset, RuntimeEvent, Trial
from trials.triage import signatures


def threshold_of(dataset: Dataset | None) -> float:
    """The reward a trial of this dataset passes at."""
    return dataset.pass_reward if dataset is not None and dataset.pass_reward is not None else PASS_REWARD


# The formats whose trials' status comes from their headline reward alone (FormatTraits.status_by_reward).
SCORED_BY_REWARD = frozenset(name for name, traits in FORMAT_TRAITS.items() if traits.status_by_reward)
# A live trial's format (trials/live/service.py): its reward decides it when its runner says it completed;
# one its runner said failed (`lime.TRIAL_FAILED`) keeps that verdict, which no threshold changes.
LIVE_FORMAT = "live"


def decided_status(dataset: Dataset | None, source_format: str, status: str, reward: float | None) -> str:
    """The status a trial is written with: its format's, decided again at its dataset's threshold where the
    dataset sets one and the format's status comes from the reward."""
    return at_threshold(dataset, status, reward) if source_format in SCORED_BY_REWARD else status


def at_threshold(dataset: Dataset | None, status: str, reward: float | None) -> str:
    """A status its reward decided, at the dataset's threshold where it sets one (a live trial's, as it ends)."""
    return status if dataset is None or dataset.pass_reward is None else status_at(status, reward, dataset.pass_reward)


def rescore(dataset: Dataset, trial_ids: Iterable[int] | None = None) -> int:
    """The dataset's reward-scored trials (of these ids, if given) decided again at its threshold (full marks
    when it sets none), each changed one's failure cluster and flags with it; how many changed. Their
    `updated_at` moves, so stored comparisons and grids count them anew."""
    threshold = threshold_of(dataset)
    decided = Case(
        When(reward__gte=threshold, then=Value("passed")),
        When(reward__gt=0, then=Value("partial")),
        default=Value("failed"),
    )
    completed = RuntimeEvent.objects.filter(trial=OuterRef("pk"), type=lime.TRIAL_COMPLETED)
    by_reward = Q(source_format__in=sorted(SCORED_BY_REWARD)) | (Q(source_format=LIVE_FORMAT) & Exists(completed))
    trials = Trial.objects.filter(by_reward, dataset=dataset, status__in=DECIDED_BY_REWARD, reward__isnull=False)
    if trial_ids is not None:
        trials = trials.filter(pk__in=list(trial_ids))
    changed = list(trials.annotate(decided=decided).exclude(status=F("decided")).values_list("pk", flat=True))
    if changed:
        Trial.objects.filter(pk__in=changed).update(status=decided, updated_at=timezone.now())
        signatures.sign_trials(changed)
    return len(changed)


def pass_rule(datasets: Iterable[Dataset | None]) -> dict[str, str]:
    """How a page's pass counts over trials of these datasets (None: a trial of none) were decided: `head`,
    what a trial passes at ("reward ≥ 0.5", or one threshold a dataset), and `source`, where it came from."""
    setting: dict[float, list[str]] = defaultdict(list)
    default = False
    for dataset in set(datasets):
        if dataset is None or dataset.pass_reward is None:
            default = True
        else:
            setting[dataset.pass_reward].append(str(dataset))
    if not setting:
        return {"head": f"reward ≥ {PASS_REWARD}", "source": "full marks, the default: no dataset here sets its own"}
    if len(setting) == 1 and not default:
        ((threshold, names),) = setting.items()
        return {"head": f"reward ≥ {threshold}", "source": f"set on dataset {', '.join(sorted(names))}"}
    parts = [f"≥ {threshold} in {', '.join(sorted(names))}" for threshold, names in sorted(setting.items())]
    parts += [f"≥ {PASS_REWARD} in the others"] if default else []
    source = "each set on its dataset" + ("; full marks, the default, in the others" if default else "")
    return {"head": "reward " + "; ".join(parts), "source": source}


def pass_threshold(dataset: Dataset | None) -> dict[str, float | str]:
    """The reward a trial of this dataset passes at and where it came from ("dataset", or "default": full
    marks), with the rule as a page states it (`pass_rule`): what an export says decided its status."""
    rule = pass_rule([dataset])
    source = "default" if dataset is None or dataset.pass_reward is None else "dataset"
    return {
        "reward": threshold_of(dataset),
        "source": source,
        "rule": f"{rule['head']} (the threshold: {rule['source']})",
    }


def datasets_of(trials: QuerySet[Trial]) -> list[Dataset | None]:
    """The datasets of these trials (None: some have none), for `pass_rule`."""
    ids = set(trials.order_by().values_list("dataset_id", flat=True).distinct())
    return [*Dataset.objects.filter(pk__in=ids - {None}), *([None] if None in ids else [])]
