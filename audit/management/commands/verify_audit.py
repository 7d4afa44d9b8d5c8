from django.core.management.base import BaseCommand, CommandError

from audit.selectors import audit_tenant_ids
from audit.verify import verify_tenant_chain
from memory_service.exceptions import ApplicationError
from tenants.context import platform_context
from tenants.selectors import tenant_get_by_slug, tenant_slugs


class Command(BaseCommand):
    help = "Verify every tenant's audit chain (or one tenant's) and report the first broken link."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="Tenant slug (default: every tenant with events)")

    def handle(self, *args, **options):
        with platform_context():
            if options["tenant"]:
                try:
                    tenant_ids = [tenant_get_by_slug(slug=options["tenant"]).id]
                except ApplicationError as exc:
                    raise CommandError(exc.message) from exc
            else:
                tenant_ids = audit_tenant_ids()
            slugs = {str(k): v for k, v in tenant_slugs(ids=tenant_ids).items()}
            reports = [verify_tenant_chain(tenant_id) for tenant_id in sorted(tenant_ids, key=str)]
        broken = 0
        for report in reports:
            name = slugs.get(report.tenant_id, report.tenant_id)
            if report.ok:
                self.stdout.write(f"{name}: {report.events} events, chain intact")
            else:
                broken += 1
                self.stdout.write(self.style.ERROR(f"{name}: BROKEN at event #{report.broken_seq}: {report.reason}"))
        if broken:
            raise CommandError(f"{broken} of {len(reports)} audit chains are broken.")
        self.stdout.write(self.style.SUCCESS(f"{len(reports)} audit chains verified."))
