"""REST interface onto erasure (``admin``)."""

from dataclasses import asdict

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import user_pseudonym
from memory_service.api.serializers import StrictSerializer
from memory_service.erasure.services import user_erase
from memory_service.fields import BoundedCharField
from memory_service.schema import ADMIN
from tenants.models import Permission


class ErasureCreateApi(APIView):
    """Erase one user's data from the tenant; 200 with what was removed."""

    required_permission = Permission.ADMIN

    @extend_schema_serializer(component_name="ErasureInput")
    class InputSerializer(StrictSerializer):
        user = BoundedCharField(max_length=128)

    @extend_schema_serializer(component_name="ErasureCounts")
    class OutputSerializer(serializers.Serializer):
        user = serializers.CharField(help_text="The erased user's pseudonym, as the audit records it")
        memories = serializers.IntegerField()
        embeddings = serializers.IntegerField()
        supersessions = serializers.IntegerField()
        activity = serializers.IntegerField()
        session_contexts = serializers.IntegerField()
        archives = serializers.IntegerField()

    @extend_schema(
        operation_id="eraseUserData",
        summary="Erase a user's data",
        description=(
            "Removes one user's memories (authored or owned), their embeddings, activity, sessions, "
            "session contexts and any export archive holding them; answers the counts. The audit keeps "
            "the fact under the user's pseudonym. Cannot be undone. Needs `admin`."
        ),
        tags=[ADMIN],
        request=InputSerializer,
        responses=OutputSerializer,
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = serializer.validated_data["user"]
        counts = user_erase(principal=request.auth, user=user)
        return Response(self.OutputSerializer({"user": user_pseudonym(user)} | asdict(counts)).data)
