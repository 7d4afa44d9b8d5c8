from django.core.management.base import BaseCommand, CommandError

from audit.models import AuditEvent
from audit.verify import verify_tenant_chain
from memory_service.exceptions import ApplicationError
from tenants.context import platform_context
from tenants.models import Tenant
from tenants.selectors import tenant_get_by_slug


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
                tenant_ids = list(AuditEvent.objects.values_list("tenant_id", flat=True).distinct())
            slugs = {str(k): v for k, v in Tenant.objects.filter(id__in=tenant_ids).values_list("id", "slug")}
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
