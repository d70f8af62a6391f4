"""The imports API: POST a file to import it, GET an import's status and progress."""

from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from core import roles
from trials.models import Import
from trials.queue import import_upload
from trials.uploads.serializers import ImportCreateSerializer, ImportSerializer


class ImportListCreate(generics.ListCreateAPIView):
    """POST a file (multipart field `file`, optionally its `path` relative to the folder it is from, which the
    import reads as `import_packs` on that folder would): the import is queued and its id returned at once."""

    queryset = Import.objects.all()
    parser_classes = [MultiPartParser]  # (a urlencoded form cannot carry the file: 415, not a 400 about it)
    required_right = roles.IMPORT
    max_body_setting = "IMPORT_MAX_UPLOAD_BYTES"  # (the file streams to disk as it arrives)

    def get_serializer_class(self):
        return ImportCreateSerializer if self.request.method == "POST" else ImportSerializer

    @extend_schema(request=ImportCreateSerializer, responses={202: ImportSerializer})
    def post(self, request, *args, **kwargs):
        if len(request.FILES.getlist("file")) > 1:  # one import, one id: say so rather than drop files
            raise ValidationError({"file": ["one file per request (several were sent); POST each on its own"]})
        serializer = ImportCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        upload = serializer.validated_data["file"]
        name = serializer.validated_data.get("path") or upload.name  # (a relative path names its folders too)
        imp = import_upload(upload, name, origin=Import.Origin.API, user=request.user)
        imp.refresh_from_db()
        return Response(ImportSerializer(imp).data, status=status.HTTP_202_ACCEPTED)


class ImportDetail(generics.RetrieveAPIView):
    queryset = Import.objects.all()
    serializer_class = ImportSerializer
