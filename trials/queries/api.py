"""`/api/saved-queries/`: list, save and delete the caller's own saved queries."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.utils.decorators import method_decorator
from rest_framework import generics, serializers

from core.roles import READ
from trials import query
from trials.models import SavedQuery


class SavedQuerySerializer(serializers.ModelSerializer):
    url = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = SavedQuery
        fields = ["id", "name", "query", "url", "created_at"]
        read_only_fields = ["id", "url", "created_at"]

    def validate_name(self, value: str) -> str:
        name = value.strip()
        if SavedQuery.objects.filter(user=self.context["request"].user, name=name).exists():
            raise serializers.ValidationError("you already have a saved query of that name")
        return name

    def validate_query(self, value: str) -> str:
        text = value.strip()
        try:
            query.parse(text)
        except query.QueryError as error:
            raise serializers.ValidationError(str(error)) from None
        return text


class Own(generics.GenericAPIView):
    """The caller's saved queries only; saving one changes nothing shared, so any role may (READ)."""

    serializer_class = SavedQuerySerializer
    required_right = READ

    def get_queryset(self):
        return SavedQuery.objects.filter(user=self.request.user.pk)


@method_decorator(login_not_required, name="dispatch")
class SavedQueryList(generics.ListCreateAPIView, Own):
    def perform_create(self, serializer) -> None:
        serializer.save(user=self.request.user)


@method_decorator(login_not_required, name="dispatch")
class SavedQueryDetail(generics.RetrieveDestroyAPIView, Own):
    pass
