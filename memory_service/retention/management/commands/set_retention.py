from argparse import SUPPRESS

from django.core.management.base import BaseCommand, CommandError

from memory_service.exceptions import ApplicationError
from memory_service.retention.services import tenant_retention_set
from tenants.context import platform_context
from tenants.management.commands._common import command_error
from tenants.selectors import tenant_get_by_slug


def _period(value: str) -> int | None:
    if value == "default":
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise CommandError("A period is a positive integer or 'default'.") from exc


class Command(BaseCommand):
    help = "Show or change a tenant's retention periods ('default' falls back to the settings)."

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="Tenant slug")
        for flag, meaning in (
            ("--session-ttl-hours", "session memories live this long after their last write"),
            ("--export-retention-hours", "export archives are kept this long"),
            ("--activity-retention-days", "activity rows are kept this long"),
        ):
            parser.add_argument(flag, type=_period, default=SUPPRESS, help=f"{meaning} (or 'default')")

    def handle(self, *args, **options):
        names = ("session_ttl_hours", "export_retention_hours", "activity_retention_days")
        changes = {name: options[name] for name in names if name in options}  # only those given
        try:
            with platform_context():
                tenant = tenant_get_by_slug(slug=options["tenant"])
                if changes:
                    tenant = tenant_retention_set(tenant=tenant, **changes)
        except ApplicationError as exc:
            raise command_error(exc) from exc
        self.stdout.write(
            f"{tenant.slug}: session memories {tenant.session_ttl}, archives {tenant.export_retention}, "
            f"activity rows {tenant.activity_retention}"
        )
