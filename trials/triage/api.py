"""Triage API: file feedback on a trial or a failure cluster; read clusters, the queue, scenarios,
blockers, waivers; export QC evidence."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from core import roles
from core.ids import parse_pk
from trials.models import Trial
from trials.models.qc import FailureCluster, QCItem
from trials.triage import clusters, export, prefill, queries, services
from trials.triage.forms import ClusterFeedbackForm, FeedbackForm
from trials.triage.serializers import (
    BlockerSerializer,
    ClusterSerializer,
    FeedbackRequestSerializer,
    QCItemDetailSerializer,
    QCItemSerializer,
    QCScenarioDetailSerializer,
    QCScenarioSerializer,
    QueueRowSerializer,
)


class RoleAPIView(APIView):
    permission_classes = [roles.RolePermission]


def _form_data(payload) -> dict:
    """JSON body -> form data: evidence refs may be "kind:ref" strings or {kind, ref} objects."""
    data = dict(payload.items()) if hasattr(payload, "items") else {}
    if hasattr(payload, "getlist"):
        data["evidence_refs"] = payload.getlist("evidence_refs")
    refs = data.get("evidence_refs") or []
    if not isinstance(refs, list):  # one ref given alone (a number is refused by the form, not a 500)
        refs = [refs]
    data["evidence_refs"] = [f"{r.get('kind')}:{r.get('ref')}" if isinstance(r, dict) else str(r) for r in refs]
    for key in ("failure_mode", "scenario", "waived_item", "approver"):
        if data.get(key) is None:
            data.pop(key, None)
    for key, value in data.items():  # form fields read text: a number as its digits
        if key != "evidence_refs" and isinstance(value, int | float):
            data[key] = str(value)
    # As the API writes them back: the approver by user name, the waived item by its label (QC-4).
    if isinstance(data.get("approver"), str) and parse_pk(data["approver"]) is None:
        user = get_user_model().objects.filter(username=data["approver"]).values_list("pk", flat=True).first()
        data["approver"] = user if user is not None else data["approver"]
    if isinstance(data.get("waived_item"), str):
        data["waived_item"] = data["waived_item"].removeprefix("QC-")
    return data


class TrialFeedback(RoleAPIView):
    """GET: what the form would pre-fill. POST: file a QC item (201), 400 with field errors."""

    required_right = roles.FILE_QC
    read_right = roles.FILE_QC  # the GET is the form's pre-fill: for those who may file

    @extend_schema(responses={200: OpenApiResponse(description="pre-fill and evidence choices")})
    def get(self, request, pk: int):
        trial = get_object_or_404(Trial, pk=pk)
        guess = prefill.prefill(trial)
        return Response(
            {
                "trial": trial.pk,
                "category": guess.category,
                "code": guess.code,
                "source": guess.source,
                "verifierErrors": guess.verifier_errors,
                "evidenceRefs": [value for _, options in prefill.evidence_choices(trial) for value, _ in options],
                "kinds": QCItem.Kind.values,
            }
        )

    @extend_schema(request=FeedbackRequestSerializer, responses={201: QCItemSerializer})
    def post(self, request, pk: int):
        trial = get_object_or_404(Trial, pk=pk)
        data = _form_data(request.data)
        if (refused := _feedback_errors(request, data)) is not None:
            return refused
        form = FeedbackForm(data=data, trial=trial, user=request.user)
        if not form.is_valid():
            return Response(form.errors.get_json_data(), status=status.HTTP_400_BAD_REQUEST)
        item = services.file_item(request.user, trial, form.cleaned_data)
        return Response(QCItemSerializer(item).data, status=status.HTTP_201_CREATED)


def _feedback_errors(request, data: dict) -> Response | None:
    """The refusals both feedback endpoints give before the form reads the body."""
    not_one_value = {  # a form field takes one value: a list or an object is refused, not read as text
        key: [{"message": "Give one value, not a list or an object.", "code": "invalid"}]
        for key, value in data.items()
        if key != "evidence_refs" and isinstance(value, list | dict)
    }
    if not_one_value:
        return Response(not_one_value, status=status.HTTP_400_BAD_REQUEST)
    if data.get("kind") == QCItem.Kind.WAIVER and not roles.has_right(request.user, roles.WAIVE):
        return Response({"detail": "Only an approver can grant a waiver."}, status=status.HTTP_403_FORBIDDEN)
    return None


_CLUSTER_FILTERS = [
    OpenApiParameter(name, str, description=f"only its trials of this {name} (id or name)")
    for name in ("job", "configuration", "dataset", "task")
]


class ClusterList(generics.ListAPIView):
    """Failure clusters, the biggest first; counts, trial ids and per-configuration counts follow the filters."""

    permission_classes = [roles.RolePermission]
    serializer_class = ClusterSerializer

    def get_queryset(self):
        return clusters.cluster_rows(self.request.query_params)

    @extend_schema(parameters=_CLUSTER_FILTERS)
    def get(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        rows = clusters.with_details(list(page or []), request.query_params)
        return self.get_paginated_response(ClusterSerializer(rows, many=True).data)


class ClusterDetail(RoleAPIView):
    @extend_schema(parameters=_CLUSTER_FILTERS, responses={200: ClusterSerializer})
    def get(self, request, pk: int):
        cluster = get_object_or_404(FailureCluster, pk=pk)
        return Response(ClusterSerializer(clusters.cluster_row(cluster, request.query_params)).data)


class ClusterFeedback(RoleAPIView):
    """POST: file one QC item for the whole cluster (the body of a trial's feedback); 201, or 400 with field errors."""

    required_right = roles.FILE_QC

    @extend_schema(request=FeedbackRequestSerializer, responses={201: QCItemSerializer})
    def post(self, request, pk: int):
        cluster = get_object_or_404(FailureCluster, pk=pk)
        trials = list(Trial.objects.filter(cluster=cluster).order_by("pk"))
        if not trials:
            return Response({"detail": f"{cluster.label} has no trial."}, status=status.HTTP_400_BAD_REQUEST)
        data = _form_data(request.data)
        if (refused := _feedback_errors(request, data)) is not None:
            return refused
        form = ClusterFeedbackForm(data=data, trial=trials[0], user=request.user)
        if not form.is_valid():
            return Response(form.errors.get_json_data(), status=status.HTTP_400_BAD_REQUEST)
        item = services.file_cluster(request.user, cluster, trials, form.cleaned_data)
        return Response(QCItemSerializer(item).data, status=status.HTTP_201_CREATED)


class Queue(generics.ListAPIView):
    """Untriaged failures (failed, unscored, or flagged whatever the reward): the triage queue's rows."""

    permission_classes = [roles.RolePermission]
    serializer_class = QueueRowSerializer

    def get_queryset(self):
        return queries.queue(self.request.query_params, self.request.user)

    @extend_schema(
        parameters=[
            OpenApiParameter("cluster", int, description="a failure cluster's id"),
            OpenApiParameter("category", str, description="failure category (the trial's or its cluster's)"),
            OpenApiParameter("job", str, description="job id or name"),
            OpenApiParameter("configuration", str, description="configuration id or key"),
            OpenApiParameter("task", str, description="task id or name"),
            OpenApiParameter("assignee", str, description='a user name, "me", or "none"'),
            OpenApiParameter("flag", str, description='a safety flag, or "any"'),
            OpenApiParameter("sort", str, description=f"{', '.join(queries.QUEUE_SORTS)}; '-' first: descending"),
        ]
    )
    def get(self, request, *args, **kwargs):
        cluster = request.query_params.get("cluster")
        if cluster is not None and parse_pk(cluster) is None:
            raise ValidationError({"cluster": [f"a whole number from 1, not {cluster!r}"]})
        return super().get(request, *args, **kwargs)


class ScenarioList(generics.ListAPIView):
    permission_classes = [roles.RolePermission]
    serializer_class = QCScenarioSerializer

    def get_queryset(self):
        return queries.scenario_rows()


class ScenarioDetail(generics.RetrieveAPIView):
    permission_classes = [roles.RolePermission]
    serializer_class = QCScenarioDetailSerializer

    def get_queryset(self):
        return queries.scenario_rows().prefetch_related("failure_modes__items", "items__trial")


class _ItemList(generics.ListAPIView):
    permission_classes = [roles.RolePermission]
    serializer_class = QCItemSerializer


class BlockerList(_ItemList):
    serializer_class = BlockerSerializer

    def get_queryset(self):
        return queries.blockers()


class WaiverList(_ItemList):
    def get_queryset(self):
        return queries.waivers().order_by("expires_at", "pk")


class ItemList(_ItemList):
    """All QC items; `?trial=<id>` for one trial's."""

    def get_queryset(self):
        items = QCItem.objects.select_related("trial", "scenario", "failure_mode").order_by("-pk")
        trial = self.request.query_params.get("trial")
        return items.filter(trial_id=pk) if (pk := parse_pk(trial)) is not None else items


class _ItemDetail(generics.RetrieveAPIView):
    permission_classes = [roles.RolePermission]
    serializer_class = QCItemDetailSerializer
    kind: str | None = None

    def get_queryset(self):
        items = QCItem.objects.select_related("trial").prefetch_related("history__actor", "waivers")
        return items.filter(kind=self.kind) if self.kind else items


class ItemDetail(_ItemDetail):
    pass


class BlockerDetail(_ItemDetail):
    kind = QCItem.Kind.RELEASE_BLOCKER


class WaiverDetail(_ItemDetail):
    kind = QCItem.Kind.WAIVER


class QCExport(RoleAPIView):
    """The Lime Agent QC evidence pack; `?download=1` as an attachment."""

    @extend_schema(responses={200: OpenApiResponse(description="agent-qc-evidence.json")})
    def get(self, request):
        params = request.query_params
        data = export.build_evidence(
            repo=params.get("repo", ""), ref=params.get("ref", ""), diff_base=params.get("diffBase", "")
        )
        response = JsonResponse(data, json_dumps_params={"indent": 2, "ensure_ascii": False})
        if params.get("download"):
            response["Content-Disposition"] = 'attachment; filename="agent-qc-evidence.json"'
        return response
