from django.core.management.base import BaseCommand, CommandError

from memory_service.exceptions import ApplicationError
from memory_service.pii import ENTITY_TYPES
from tenants.context import platform_context
from tenants.masking import tenant_pii_policy_set
from tenants.selectors import tenant_get_by_slug


class Command(BaseCommand):
    help = "Show or change a tenant's PII masking policy (secrets are always masked)."

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="Tenant slug")
        parser.add_argument(
            "--mode", choices=["label", "pseudonym"], help="label (<EMAIL_ADDRESS>) or keyed pseudonyms"
        )
        parser.add_argument(
            "--entities", help=f"comma-separated entity types, or 'all' (types: {', '.join(ENTITY_TYPES)})"
        )
        parser.add_argument(
            "--require-ner", action="store_true", default=None, help="refuse writes without the NER tier"
        )
        parser.add_argument("--no-require-ner", action="store_false", dest="require_ner")

    def handle(self, *args, **options):
        entities = None
        if options["entities"]:
            entities = [] if options["entities"] == "all" else [e.strip() for e in options["entities"].split(",")]
        try:
            with platform_context():
                tenant = tenant_get_by_slug(slug=options["tenant"])
                if options["mode"] or entities is not None or options["require_ner"] is not None:
                    tenant = tenant_pii_policy_set(
                        tenant=tenant, mode=options["mode"], entities=entities, require_ner=options["require_ner"]
                    )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        entities_shown = ", ".join(tenant.pii_entities) or "all the loaded tiers detect"
        self.stdout.write(
            f"{tenant.slug}: mode {tenant.pii_mode}; entities {entities_shown}; "
            f"NER tier {'required' if tenant.pii_require_ner else 'not required'}; secrets always masked."
        )
