from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from trials import services
from trials.filters import TrialFilter
from trials.models import Import, Trial
from trials.serializers import (
    ImportCreateSerializer,
    ImportSerializer,
    TrialDetailSerializer,
    TrialListSerializer,
)


class ImportListCreate(generics.ListCreateAPIView):
    """POST a file (multipart field `file`): the import is queued and its id returned at once."""

    queryset = Import.objects.all()
    parser_classes = [MultiPartParser, FormParser]

    def get_serializer_class(self):
        return ImportCreateSerializer if self.request.method == "POST" else ImportSerializer

    @extend_schema(request=ImportCreateSerializer, responses={202: ImportSerializer})
    def post(self, request, *args, **kwargs):
        serializer = ImportCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        upload = serializer.validated_data["file"]
        imp = services.import_upload(upload, upload.name, origin=Import.Origin.API, user=request.user)
        imp.refresh_from_db()
        return Response(ImportSerializer(imp).data, status=status.HTTP_202_ACCEPTED)


class ImportDetail(generics.RetrieveAPIView):
    queryset = Import.objects.all()
    serializer_class = ImportSerializer


class TrialList(generics.ListAPIView):
    queryset = Trial.objects.for_list().order_by("pk")
    serializer_class = TrialListSerializer
    filterset_class = TrialFilter


class TrialDetail(generics.RetrieveAPIView):
    queryset = Trial.objects.for_list()
    serializer_class = TrialDetailSerializer


class TrialTrajectory(APIView):
    """The trial's trajectory as ATIF JSON: the stored bytes of the imported file, unchanged."""

    @extend_schema(responses={200: OpenApiResponse(description="ATIF trajectory JSON")})
    def get(self, request, pk: int):
        trial = get_object_or_404(Trial, pk=pk)
        trajectory = trial.trajectories.filter(role__in=("main", "step")).order_by("position").first()
        if trajectory is None or trajectory.blob is None:
            raise Http404("this trial has no trajectory")
        return FileResponse(trajectory.blob.open(), content_type="application/json")
