"""What Benchviewer stores: raw bytes (Blob, PackFile) and the rows that index them.

Raw bytes are the source of truth. Every other table is an index for pages,
filters and aggregates, and keeps what it has no column for in a JSON field.

One module per group of tables; every model is importable from here, as Django expects.
The QC tables (qc.py) and the failure taxonomy they store (taxonomy.py) are here too; their
views and services are in trials/triage/.
"""

from trials.models.catalog import Configuration, Dataset, Job, JobQuerySet, Task
from trials.models.evidence import (
    Artifact,
    ContextRecord,
    Document,
    PermissionDecision,
    ReceivedBatch,
    ReceivedSpan,
    RewardCriterion,
    RuntimeEvent,
)
from trials.models.imports import Blob, Import, Pack, PackFile
from trials.models.qc import (
    AuditEntry,
    Comment,
    FailureCluster,
    FailureMode,
    QCItem,
    QCItemCitation,
    QCScenario,
    QueueEntry,
    Severity,
    TriageAssignment,
    TriageTag,
)
from trials.models.saved_queries import SavedQuery
from trials.models.steps import ObservationResult, Step, StepText, StepWords, ToolCall, Trajectory
from trials.models.trial import Trial, TrialQuerySet, step_url
from trials.storage.fields import CharField, JSONField, NulSafeJSONEncoder, TextField, nul_free

__all__ = [
    "Artifact",
    "AuditEntry",
    "Blob",
    "CharField",
    "Comment",
    "Configuration",
    "ContextRecord",
    "Dataset",
    "Document",
    "FailureCluster",
    "FailureMode",
    "Import",
    "JSONField",
    "Job",
    "JobQuerySet",
    "NulSafeJSONEncoder",
    "ObservationResult",
    "Pack",
    "PackFile",
    "PermissionDecision",
    "QCItem",
    "QCItemCitation",
    "QCScenario",
    "RewardCriterion",
    "RuntimeEvent",
    "SavedQuery",
    "Severity",
    "Step",
    "StepText",
    "StepWords",
    "Task",
    "TextField",
    "ToolCall",
    "Trajectory",
    "Trial",
    "TrialQuerySet",
    "TriageAssignment",
    "QueueEntry",
    "ReceivedBatch",
    "ReceivedSpan",
    "TriageTag",
    "nul_free",
    "step_url",
]
