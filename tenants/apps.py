from django.apps import AppConfig
from django.db.models.signals import post_migrate


class TenantsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tenants"
    default = True

    def ready(self):
        import tenants.schema  # noqa: F401  (registers the OpenAPI auth scheme)
        from tenants.grants import grant_application_role

        post_migrate.connect(grant_application_role, sender=self)
