"""Token management through the API (``admin`` permission). Tenants are made by operators."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_service.api.serializers import StrictSerializer
from memory_service.fields import BoundedCharField
from memory_service.schema import ADMIN
from tenants.models import Permission
from tenants.selectors import token_get, token_list_read
from tenants.services import token_create, token_revoke


class TokenOutputSerializer(serializers.Serializer):
    prefix = serializers.CharField()
    name = serializers.CharField()
    permissions = serializers.ListField(child=serializers.CharField())
    user = serializers.CharField()
    repositories = serializers.ListField(child=serializers.CharField())
    created = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    expiry_date = serializers.DateTimeField(allow_null=True)
    revoked = serializers.BooleanField()


class TokenListApi(APIView):
    required_permission = Permission.ADMIN

    class InputSerializer(StrictSerializer):
        name = BoundedCharField(max_length=50)
        permissions = serializers.ListField(
            child=serializers.ChoiceField(choices=Permission.values), required=False, allow_empty=False, min_length=1
        )
        user = serializers.CharField(required=False, allow_blank=True, default="")
        repositories = serializers.ListField(child=serializers.CharField(), required=False, default=list)
        expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)

    class CreatedSerializer(TokenOutputSerializer):
        token = serializers.CharField(help_text="The raw token. Shown once; store it now.")

    @extend_schema(
        operation_id="listTokens",
        summary="List API tokens",
        description=(
            "Lists the tenant's API tokens with their prefix, client name, permissions, bindings, expiry, "
            "last use and revocation; never their secrets. Needs `admin`."
        ),
        tags=[ADMIN],
        responses=TokenOutputSerializer(many=True),
    )
    def get(self, request):
        tokens = token_list_read(principal=request.auth)
        return Response({"results": TokenOutputSerializer(tokens, many=True).data, "next": None})

    @extend_schema(
        operation_id="createToken",
        summary="Create an API token",
        description=(
            "Issues a token for one client, optionally bound to a user and to repositories, with an "
            "expiry. It never exceeds the issuing token's permissions or bindings. The raw `token` is "
            "in this answer only: store it now. Needs `admin`."
        ),
        tags=[ADMIN],
        request=InputSerializer,
        responses={201: CreatedSerializer},
    )
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        issued = token_create(
            tenant=request.auth.tenant, actor=request.auth.actor, issuer=request.auth, **data.validated_data
        )
        body = TokenOutputSerializer(issued.token).data | {"token": issued.raw}
        return Response(body, status=status.HTTP_201_CREATED)


class TokenRevokeApi(APIView):
    required_permission = Permission.ADMIN

    @extend_schema(
        operation_id="revokeToken",
        summary="Revoke an API token",
        description=(
            "Revokes the token with this prefix at once; its requests get 401 from then on. To rotate, "
            "create a new token first, then revoke the old one. Needs `admin`."
        ),
        tags=[ADMIN],
        request=None,
        responses=TokenOutputSerializer,
    )
    def post(self, request, prefix: str):
        token = token_get(principal=request.auth, prefix=prefix)
        token = token_revoke(tenant=request.auth.tenant, actor=request.auth.actor, token=token)
        return Response(TokenOutputSerializer(token).data)
