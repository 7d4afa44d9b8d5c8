import json

from django.core.management.base import BaseCommand

from memory_service.exceptions import ApplicationError
from tenants.context import platform_context
from tenants.management.commands._common import command_error, parse_permissions
from tenants.models import Permission
from tenants.services import tenant_create, token_create


class Command(BaseCommand):
    help = "Create a tenant and its first API token; the token is printed once."

    def add_arguments(self, parser):
        parser.add_argument("slug", help="Short unique name of the tenant, e.g. acme")
        parser.add_argument("--name", default="", help="Display name (default: the slug)")
        parser.add_argument("--token-name", default="default", help="Client name of the first token")
        parser.add_argument(
            "--permissions",
            help=f"Comma-separated, from {','.join(Permission.values)} (default: memory:read,memory:write)",
        )
        parser.add_argument("--user", default="", help="Bind the token to this user id")
        parser.add_argument("--json", action="store_true", help='Print {"tenant": ..., "token": ...}')

    def handle(self, *args, **options):
        try:
            with platform_context():
                tenant = tenant_create(slug=options["slug"], name=options["name"])
                issued = token_create(
                    tenant=tenant,
                    actor="system:create_tenant",
                    name=options["token_name"],
                    permissions=parse_permissions(options["permissions"]),
                    user=options["user"],
                )
        except ApplicationError as exc:
            raise command_error(exc) from exc
        if options["json"]:
            self.stdout.write(json.dumps({"tenant": tenant.slug, "token": issued.raw}))
        else:
            self.stdout.write(f"Created tenant {tenant.slug}.")
            self.stdout.write(f"Token '{issued.token.name}' ({', '.join(issued.token.permissions)}):")
            self.stdout.write(issued.raw)
            self.stdout.write("Store it now: it is not shown again.")
