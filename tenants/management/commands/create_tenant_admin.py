import getpass
import sys

from django.core.management.base import BaseCommand, CommandError

from memory_service.exceptions import ApplicationError
from tenants.context import platform_context
from tenants.management.commands._common import command_error
from tenants.selectors import tenant_get_by_slug
from tenants.services import tenant_admin_create


class Command(BaseCommand):
    help = "Create a tenant administrator: a staff login to the admin that sees only one tenant."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--tenant", required=True, help="Tenant slug")
        parser.add_argument("--password-stdin", action="store_true", help="Read the password from standard input")

    def handle(self, *args, **options):
        if options["password_stdin"]:
            password = sys.stdin.readline().rstrip("\n")
        else:
            password = getpass.getpass("Password: ")
            if password != getpass.getpass("Password (again): "):
                raise CommandError("The passwords do not match.")
        try:
            with platform_context():
                tenant = tenant_get_by_slug(slug=options["tenant"])
                user = tenant_admin_create(tenant=tenant, username=options["username"], password=password)
        except ApplicationError as exc:
            raise command_error(exc) from exc
        self.stdout.write(f"Created tenant administrator {user.username} for {tenant.slug}.")
