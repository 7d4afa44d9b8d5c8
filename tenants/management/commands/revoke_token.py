from django.core.management.base import BaseCommand

from memory_service.exceptions import ApplicationError
from tenants.access import Principal
from tenants.context import platform_context
from tenants.management.commands._common import command_error
from tenants.selectors import tenant_get_by_slug, token_get
from tenants.services import token_revoke


class Command(BaseCommand):
    help = "Revoke an API token, named by its prefix (the part before the dot)."

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="Tenant slug")
        parser.add_argument("prefix", help="Token prefix, e.g. AbCd1234")

    def handle(self, *args, **options):
        try:
            with platform_context():
                tenant = tenant_get_by_slug(slug=options["tenant"])
                operator = Principal.operator(tenant=tenant, actor="system:revoke_token")
                token = token_get(principal=operator, prefix=options["prefix"])
                token = token_revoke(tenant=tenant, actor=operator.actor, token=token)
        except ApplicationError as exc:
            raise command_error(exc) from exc
        self.stdout.write(f"Revoked token '{token.name}' ({token.prefix}) of {tenant.slug}.")
