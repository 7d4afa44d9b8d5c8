from django.core.management.commands.migrate import Command as DjangoMigrateCommand

from tenants.context import ADMIN_DB_ALIAS


class Command(DjangoMigrateCommand):
    """``migrate`` on the ``admin`` alias by default: the schema owner's role runs migrations."""

    def handle(self, *args, **options):
        if options["database"] == "default":
            options["database"] = ADMIN_DB_ALIAS
        return super().handle(*args, **options)
