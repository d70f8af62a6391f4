"""The trials a Harbor job's result.json names in its stats (pure, no Django).

`stats.evals[<agent>__<model>__<dataset>]` lists each trial by name under the reward it got
(`reward_stats[<key>][<value>]`) and the exception it raised (`exception_stats[<type>]`). A
trial whose folder has no result.json of its own (cancelled, still being written, lost), or
no folder at all, is still a trial of the job: these give it what the job knows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trials.ingest.records import ConfigurationRef, DatasetRef, ParsedTrial, TaskRef
from trials.ingest.values import as_dict, as_list, to_str

NAMED_ONLY = "named only in the job's result.json stats: no trial folder in this pack"
NO_RESULT = "its folder has no result.json: status and reward from the job's result.json stats"


@dataclass
class StatsTrial:
    eval_key: str
    rewards: dict[str, float] = field(default_factory=dict)
    exception_type: str = ""


def stats_trials(result: dict[str, Any]) -> dict[str, StatsTrial]:
    """{trial name: what the job's stats say of it}."""
    found: dict[str, StatsTrial] = {}
    for eval_key, stats in as_dict(as_dict(result.get("stats")).get("evals")).items():
        stats = as_dict(stats)
        for reward_key, by_value in as_dict(stats.get("reward_stats")).items():
            for value, names in as_dict(by_value).items():
                for name in as_list(names):
                    entry = found.setdefault(to_str(name), StatsTrial(to_str(eval_key)))
                    try:
                        entry.rewards[to_str(reward_key)] = float(value)
                    except ValueError:
                        pass  # (a reward Harbor wrote as a non-number: the job's stats keep it)
        for exception_type, names in as_dict(stats.get("exception_stats")).items():
            for name in as_list(names):
                found.setdefault(to_str(name), StatsTrial(to_str(eval_key))).exception_type = to_str(exception_type)
    return found


def apply_stats(trial: ParsedTrial, stats: StatsTrial) -> None:
    """What the job's stats know of a trial that has no result.json of its own."""
    agent, _, rest = stats.eval_key.partition("__")
    model, _, dataset = rest.partition("__")
    if trial.dataset is None or trial.dataset.name in ("", "adhoc"):
        trial.dataset = DatasetRef(dataset or "adhoc")
    if trial.configuration is None or trial.configuration.key == "unknown":
        key = "__".join(x for x in (agent, model) if x) or "unknown"
        trial.configuration = ConfigurationRef(key=key, agent_name=agent, model_name=model)
    if not trial.rewards and stats.rewards:
        trial.rewards = dict(stats.rewards)
        trial.present.add("reward")
    if not trial.exception_type and stats.exception_type:
        trial.exception_type = stats.exception_type
    trial.provenance["evidence"] = NO_RESULT


def named_only_trial(name: str, stats: StatsTrial, job_key: str, job_name: str) -> ParsedTrial:
    trial = ParsedTrial(
        key=f"harbor:{job_key}:{name}",
        source_format="harbor",
        files_are_its_own=True,
        name=name,
        job_key=job_key,
        task=TaskRef(name.split("__")[0]),
        benchmark={"taskId": name.split("__")[0], "trialId": name, "harborJobRef": job_name},
    )
    apply_stats(trial, stats)
    trial.provenance["evidence"] = NAMED_ONLY
    return trial
