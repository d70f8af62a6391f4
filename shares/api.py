"""POST /api/shares/ (create), GET (the caller's, all for an administrator), DELETE /api/shares/<id>/ (revoke)."""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Prefetch, QuerySet
from django.http import Http404
from django.utils.decorators import method_decorator
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import roles
from shares import services
from shares.models import Share, ShareEvent
from shares.serializers import (
    AlreadySharedSerializer,
    LiveShareSerializer,
    ShareCreatedSerializer,
    ShareCreateSerializer,
    ShareSerializer,
)

ERRORS = {
    400: OpenApiResponse(
        description="bad input: the body names the field (`expires_at` or `expires_in_days` over 90 days, …)"
    ),
    401: OpenApiResponse(description="no credentials"),
    403: OpenApiResponse(description="your role may not share (a viewer)"),
    404: OpenApiResponse(description="what you asked to share does not exist, or sharing is off"),
}

READ_ERRORS = {k: v for k, v in ERRORS.items() if k != 400}


def _sharing_on() -> None:
    if not settings.SHARING_ENABLED:
        raise Http404("sharing is turned off (SHARING_ENABLED=false)")


def _shares(user: User | AnonymousUser) -> QuerySet[Share]:
    history = Prefetch("history", queryset=ShareEvent.objects.select_related("actor"))
    return (
        Share.objects.visible_to(user)
        .with_view_counts()
        .select_related("created_by", "revoked_by")
        .prefetch_related(history)
        .order_by("-created_at", "-pk")
    )


@method_decorator(login_not_required, name="dispatch")  # DRF answers 401 itself
class ShareList(generics.ListAPIView):
    # roles.SHARE lets no anonymous caller in: request.user is a User (the casts below)
    required_right = roles.SHARE
    read_right = roles.SHARE
    serializer_class = ShareSerializer

    def get_queryset(self) -> QuerySet[Share]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no user
            return Share.objects.none()
        return _shares(self.request.user)

    @extend_schema(responses={200: ShareSerializer(many=True), **READ_ERRORS})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        _sharing_on()
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=ShareCreateSerializer,
        responses={
            201: ShareCreatedSerializer,
            409: OpenApiResponse(AlreadySharedSerializer, description='you have a live link to it (if_exists="offer")'),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        _sharing_on()
        body = ShareCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            created = services.create_share(cast(User, request.user), **body.validated_data)
        except services.AlreadyShared as exc:
            newest = exc.live[0]
            detail = (
                f"you already have a live link to this, made {newest.created_at:%Y-%m-%d %H:%M} UTC, expiring "
                f"{newest.expires_at:%Y-%m-%d %H:%M} UTC; its address was shown once, when it was made. "
                'Send if_exists "new" for another link, "replace" to revoke it and make a new one.'
            )
            existing = LiveShareSerializer(exc.live, many=True).data
            return Response({"detail": detail, "existing": existing}, status=status.HTTP_409_CONFLICT)
        except services.ShareError as exc:
            return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        except services.NotFound as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        return Response(
            {
                "id": created.share.pk,
                "url": request.build_absolute_uri(created.path),
                "expires_at": created.share.expires_at,
            },
            status=status.HTTP_201_CREATED,
        )


@method_decorator(login_not_required, name="dispatch")
class ShareDetail(APIView):
    required_right = roles.SHARE
    read_right = roles.SHARE

    @extend_schema(responses={200: ShareSerializer, **READ_ERRORS})
    def get(self, request: Request, pk: int) -> Response:
        _sharing_on()
        share = generics.get_object_or_404(_shares(request.user), pk=pk)
        return Response(ShareSerializer(share).data)

    @extend_schema(
        responses={204: OpenApiResponse(description="revoked: its link answers 404 from now on"), **READ_ERRORS}
    )
    def delete(self, request: Request, pk: int) -> Response:
        _sharing_on()
        share = generics.get_object_or_404(Share.objects.visible_to(request.user), pk=pk)
        services.revoke_share(cast(User, request.user), share)
        return Response(status=status.HTTP_204_NO_CONTENT)
