from django.conf import settings

from tenants.context import ADMIN_DB_ALIAS, platform_context_active


class TenantDatabaseRouter:
    """Send queries to the ``admin`` alias only inside ``platform_context``.

    Migrations run only on ``admin``: its role owns the schema, the application's role may not
    change it.
    """

    def db_for_read(self, model, **hints):
        return ADMIN_DB_ALIAS if platform_context_active() else None

    def db_for_write(self, model, **hints):
        return ADMIN_DB_ALIAS if platform_context_active() else None

    def allow_relation(self, obj1, obj2, **hints):
        return True

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        if settings.DATABASES[db].get("TEST", {}).get("MIRROR"):
            return False
        return db == ADMIN_DB_ALIAS
