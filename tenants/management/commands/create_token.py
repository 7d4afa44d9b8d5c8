import json
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone

from memory_service.exceptions import ApplicationError
from tenants.context import platform_context
from tenants.management.commands._common import command_error, parse_permissions
from tenants.models import Permission
from tenants.selectors import tenant_get_by_slug
from tenants.services import token_create


class Command(BaseCommand):
    help = "Issue an API token for a tenant's client; the token is printed once."

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="Tenant slug")
        parser.add_argument("--name", required=True, help="Client name, e.g. claude-code")
        parser.add_argument(
            "--permissions",
            help=f"Comma-separated, from {','.join(Permission.values)} (default: memory:read,memory:write)",
        )
        parser.add_argument("--user", default="", help="Bind the token to this user id")
        parser.add_argument("--repositories", default="", help="Bind the token to these repositories (comma-separated)")
        parser.add_argument("--expires-in-days", type=int, help="Expire after this many days")
        parser.add_argument("--json", action="store_true", help='Print {"tenant": ..., "token": ...}')

    def handle(self, *args, **options):
        days = options["expires_in_days"]
        repositories = [r.strip() for r in options["repositories"].split(",") if r.strip()]
        try:
            with platform_context():
                tenant = tenant_get_by_slug(slug=options["tenant"])
                issued = token_create(
                    tenant=tenant,
                    actor="system:create_token",
                    name=options["name"],
                    permissions=parse_permissions(options["permissions"]),
                    user=options["user"],
                    repositories=repositories,
                    expires_at=timezone.now() + timedelta(days=days) if days else None,
                )
        except ApplicationError as exc:
            raise command_error(exc) from exc
        if options["json"]:
            self.stdout.write(json.dumps({"tenant": tenant.slug, "token": issued.raw}))
        else:
            self.stdout.write(issued.raw)
            self.stderr.write("Store it now: it is not shown again.")
