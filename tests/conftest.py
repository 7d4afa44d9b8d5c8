import pytest
from rest_framework.test import APIClient

from tenants.models import Permission
from tests.factories import make_tenant, make_token

ALL_PERMISSIONS = list(Permission.values)


@pytest.fixture
def tenant(db):
    return make_tenant("acme")


@pytest.fixture
def other_tenant(db):
    return make_tenant("charlie")


@pytest.fixture
def token(tenant):
    """A raw token of ``tenant`` with every permission."""
    return make_token(tenant, permissions=ALL_PERMISSIONS).raw


@pytest.fixture
def other_token(other_tenant):
    return make_token(other_tenant, permissions=ALL_PERMISSIONS).raw


def client_for(raw_token: str | None) -> APIClient:
    client = APIClient()
    if raw_token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    return client


@pytest.fixture
def api_client(token):
    """A client authenticated as ``tenant`` with every permission."""
    return client_for(token)


@pytest.fixture
def other_client(other_token):
    """A client of another tenant (the "charlie" of isolation tests)."""
    return client_for(other_token)


@pytest.fixture
def anonymous_client():
    return APIClient()


@pytest.fixture(scope="session")
def django_db_setup(request, django_test_environment, django_db_blocker):
    """Create and migrate the test database through the ``admin`` alias (the schema owner).

    pytest-django would set up only the aliases tests ask for, and ``default`` is a mirror of
    ``admin`` (same database, the application's role); so ``admin`` is always created here.
    """
    from django.db import connections
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        db_cfg = setup_databases(
            verbosity=request.config.option.verbose, interactive=False, aliases={"admin", "default"}, serialized_aliases=set()
        )
    yield
    with django_db_blocker.unblock():
        connections.close_all()
        teardown_databases(db_cfg, verbosity=request.config.option.verbose)
