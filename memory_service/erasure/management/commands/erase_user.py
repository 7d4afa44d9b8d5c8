import json
from dataclasses import asdict

from django.core.management.base import BaseCommand

from memory_service.erasure.services import user_erase
from memory_service.exceptions import ApplicationError
from tenants.access import Principal
from tenants.context import platform_context
from tenants.management.commands._common import command_error
from tenants.selectors import tenant_get_by_slug


class Command(BaseCommand):
    help = (
        "Erase one user's data from a tenant: memories (authored or owned, every scope), vectors, "
        "supersession links, activity rows, session contexts and export archives that hold them. Audited."
    )

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="Tenant slug")
        parser.add_argument("--user", required=True, help="The user id to erase")

    def handle(self, *args, **options):
        try:
            with platform_context():
                tenant = tenant_get_by_slug(slug=options["tenant"])
            counts = user_erase(
                principal=Principal.operator(tenant=tenant, actor="system:erase_user"), user=options["user"]
            )
        except ApplicationError as exc:
            raise command_error(exc) from exc
        self.stdout.write(json.dumps(asdict(counts)))
