"""Give the application's role exactly the table privileges it needs, after every migration."""

from django.conf import settings
from django.db import connections

# Tables whose rows are never changed or removed (their triggers refuse it too).
APPEND_ONLY_TABLES = ["audit_auditevent"]


def grant_application_role(using, **kwargs):
    """GRANT data access (never DDL) on every table and sequence to the ``default`` alias's role.

    Migrations run as the schema owner on the ``admin`` alias; the application connects with a
    role that can read and write rows, under RLS, but cannot alter, disable RLS or truncate.
    """
    app_role = settings.DATABASES["default"]["USER"]
    connection = connections[using]
    if not app_role or app_role == settings.DATABASES[using]["USER"]:
        return
    with connection.cursor() as cursor:
        role = connection.ops.quote_name(app_role)
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
        cursor.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}")
        cursor.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {role}")
        existing = connection.introspection.table_names(cursor)
        for table in APPEND_ONLY_TABLES:
            if table in existing:
                cursor.execute(f"REVOKE UPDATE, DELETE, TRUNCATE ON {connection.ops.quote_name(table)} FROM {role}")
