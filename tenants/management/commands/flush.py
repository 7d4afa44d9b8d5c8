import time

from django.core.management.base import CommandError
from django.core.management.color import no_style
from django.core.management.commands.flush import Command as DjangoFlushCommand
from django.core.management.sql import emit_post_migrate_signal
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections

from tenants.context import ADMIN_DB_ALIAS
from tenants.grants import APPEND_ONLY_TABLES


class Command(DjangoFlushCommand):
    """``flush`` that empties every table except the append-only audit trail, which it keeps.

    The audit table refuses TRUNCATE for every role; history is never erased, not even by a
    flush. Runs on the ``admin`` alias by default (the role that owns the tables).
    """

    def handle(self, **options):
        database = options["database"]
        if database == DEFAULT_DB_ALIAS:
            database = ADMIN_DB_ALIAS
        connection = connections[database]
        if options["interactive"]:
            answer = input("This empties every table except the audit trail. Type 'yes' to continue: ")
            if answer != "yes":
                self.stdout.write("Flush cancelled.")
                return
        tables = [
            t
            for t in connection.introspection.django_table_names(only_existing=True, include_views=False)
            if t not in APPEND_ONLY_TABLES
        ]
        statements = connection.ops.sql_flush(
            no_style(), tables, reset_sequences=options.get("reset_sequences", True),
            allow_cascade=options.get("allow_cascade", False),
        )  # fmt: skip
        for attempt in range(1, 4):
            try:
                connection.ops.execute_sql_flush(statements)
                break
            except OperationalError as exc:
                # TRUNCATE takes exclusive locks; a worker finishing a task can deadlock with it.
                if "deadlock" not in str(exc) or attempt == 3:
                    raise CommandError(f"Flush failed: {exc}") from exc
                time.sleep(0.5 * attempt)
        if statements and not options.get("inhibit_post_migrate", False):
            emit_post_migrate_signal(options["verbosity"], options["interactive"], database)
        if options["verbosity"] > 1:
            self.stdout.write(f"Emptied {len(tables)} tables; the audit trail is kept.")
