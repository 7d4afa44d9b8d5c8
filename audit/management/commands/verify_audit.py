from django.core.management.base import BaseCommand, CommandError

from audit.checkpoints import checkpoint_store
from audit.selectors import audit_tenant_ids
from audit.services import audit_checkpoint_write
from audit.verify import verify_tenant_audit
from memory_service.exceptions import ApplicationError
from tenants.context import platform_context
from tenants.selectors import tenant_get_by_slug, tenant_slugs


class Command(BaseCommand):
    help = (
        "Verify every tenant's audit chain (or one tenant's) against its latest checkpoint, report the "
        "first broken link, and checkpoint each head that verified."
    )

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="Tenant slug (default: every tenant with events or checkpoints)")

    def handle(self, *args, **options):
        store = checkpoint_store()
        with platform_context():
            if options["tenant"]:
                try:
                    tenant_ids = {str(tenant_get_by_slug(slug=options["tenant"]).id)}
                except ApplicationError as exc:
                    raise CommandError(exc.message) from exc
            else:
                # A tenant whose whole chain was deleted is known only to the checkpoint store.
                tenant_ids = {str(tenant_id) for tenant_id in audit_tenant_ids()} | set(store.tenant_ids())
            slugs = {str(k): v for k, v in tenant_slugs(ids=tenant_ids).items()}
            reports = [verify_tenant_audit(tenant_id, store=store) for tenant_id in sorted(tenant_ids)]
        broken = 0
        for report in reports:
            name = slugs.get(report.tenant_id, report.tenant_id)
            if report.ok:
                self.stdout.write(f"{name}: {report.describe()}")
                if report.events:
                    audit_checkpoint_write(tenant_id=report.tenant_id, seq=report.events, hash=report.head_hash,
                                           by="verify_audit", store=store)  # fmt: skip
            else:
                broken += 1
                self.stdout.write(self.style.ERROR(f"{name}: {report.describe()}"))
        if broken:
            raise CommandError(f"{broken} of {len(reports)} audit chains are broken.")
        self.stdout.write(self.style.SUCCESS(f"{len(reports)} audit chains verified."))
