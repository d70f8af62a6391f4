"""The one rule for joining a Lime evidence pack to its Harbor trial.

A pack may sit in the trial's folder (joined while the folder is parsed,
trials.ingest.formats.harbor_sidecars) or arrive later on its own (joined to the stored
trial, trials.imports.joins). Both call `join_evidence_pack`: the pack's ids win where
Harbor had none; Harbor's facts stay where it has them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from trials.ingest import completeness
from trials.ingest.records import ConfigurationRef, ParsedTrial, Problem

# A file name the pack refers to -> the trial's own file of that name, if it has one.
FileFinder = Callable[[str], str | None]


def join_evidence_pack(trial: ParsedTrial, pack: ParsedTrial, pack_rel: str, find: FileFinder) -> list[Problem]:
    """Merge the pack into the trial's facts; the problems it adds (refs the trial cannot back)."""
    trial.present.add("evidence_pack")
    trial.benchmark = {**trial.benchmark, **{k: v for k, v in pack.benchmark.items() if v}}
    trial.runtime_correlation = {**pack.runtime_correlation, **trial.runtime_correlation}
    trial.refs = {**trial.refs, **completeness.own_files_for(pack.refs, trial.refs, find)}
    trial.refs, unbacked = completeness.join_refs(trial.refs, pack.refs)
    problems = [unbacked_ref_problem(pack_rel, ref, pack.refs[ref]) for ref in unbacked]
    trial.problems.extend(problems)
    trial.documents = {**trial.documents, "evidence_pack": pack.documents.get("evidence_pack")}
    if pack.dataset and (trial.dataset is None or trial.dataset.name in ("", "adhoc")):
        trial.dataset = pack.dataset
    elif pack.dataset and trial.dataset and not trial.dataset.version:
        trial.dataset.version = pack.dataset.version
    trial.configuration = joined_configuration(pack.configuration, trial.configuration)
    if not trial.failure_category and pack.failure_category:
        trial.failure_category = pack.failure_category
    if trial.attempt is None:
        trial.attempt = pack.attempt
    if not trial.criteria:
        trial.criteria.extend(pack.criteria)
    return problems


def joined_configuration(pack: ConfigurationRef | None, own: ConfigurationRef | None) -> ConfigurationRef | None:
    """The pack's configuration id and role, with Harbor's agent and model where Harbor has them."""
    if pack is None or own is None:
        return own or pack
    return dataclasses.replace(
        own,
        key=pack.key or own.key,
        role=pack.role,
        agent_name=own.agent_name or pack.agent_name,
        agent_version=own.agent_version or pack.agent_version,
        model_name=own.model_name or pack.model_name,
        profiles={**own.profiles, **pack.profiles},
    )


def unbacked_ref_problem(pack_rel: str, ref: str, target: Any, alone: bool = False) -> Problem:
    lacking = "no trial folder came with it" if alone else "the trial it joins has no readable file for it"
    return Problem(
        pack_rel,
        f"the evidence pack names {target!r}, but {lacking}: counted as missing",
        json_path=f"refs.{ref}",
        severity="warning",
        kept="the evidence pack as written",
    )
