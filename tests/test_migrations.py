from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db(databases=["default", "admin"])
def test_it_has_a_migration_for_every_model_change():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=StringIO())
    except SystemExit as exc:
        pytest.fail(f"models changed without a migration:\n{out.getvalue()}")
        raise AssertionError from exc
