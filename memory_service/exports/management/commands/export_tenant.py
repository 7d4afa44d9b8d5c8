from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from memory_service.exceptions import ApplicationError
from memory_service.exports.models import ExportStatus
from memory_service.exports.services import export_job_run, export_job_start
from tenants.context import platform_context
from tenants.identifiers import validate_identifier
from tenants.management.commands._common import command_error
from tenants.selectors import tenant_get_by_slug


class Command(BaseCommand):
    help = (
        "Build a compliance export of a tenant (or of one user's data) here, with a progress bar on "
        "stderr, and print the archive's path. Audited like an export through the API."
    )

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="Tenant slug")
        parser.add_argument("--user", default="", help="export only this user's data")

    def handle(self, *args, **options):
        try:
            if options["user"]:
                validate_identifier(options["user"], field="user")
            with platform_context():
                tenant = tenant_get_by_slug(slug=options["tenant"])
            job = export_job_start(tenant=tenant, actor="system:export_tenant", user=options["user"], enqueue=False)
        except ApplicationError as exc:
            raise command_error(exc) from exc
        with tqdm(total=0, unit="row", file=self.stderr._out, disable=None) as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            finished = export_job_run(tenant_id=tenant.id, job_id=job.id, on_progress=progress)
        if finished is None or finished.status != ExportStatus.SUCCEEDED:
            raise CommandError(f"Export {job.id} did not finish; see its status in the admin.")
        counts = ", ".join(f"{name} {count}" for name, count in finished.counts.items())
        self.stdout.write(f"Export {finished.id}: {counts}")
        self.stdout.write(str(finished.archive_path))
