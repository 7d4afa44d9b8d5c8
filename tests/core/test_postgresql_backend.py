"""The database backend: Django's PostgreSQL backend with timestamps parsed by psycopg's C loader."""

import datetime

import pytest
from django.db import connection
from psycopg.pq import Format

pytestmark = pytest.mark.django_db


def test_timestamps_come_back_aware_in_utc_to_the_microsecond():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT '2024-03-05 10:00:00+09'::timestamptz, '1999-12-31 23:59:59.999999-03:30'::timestamptz,"
            " NULL::timestamptz"
        )
        tokyo, newfoundland, missing = cursor.fetchone()
    assert tokyo == datetime.datetime(2024, 3, 5, 1, 0, tzinfo=datetime.UTC)
    assert tokyo.tzinfo is datetime.UTC
    assert newfoundland == datetime.datetime(2000, 1, 1, 3, 29, 59, 999999, tzinfo=datetime.UTC)
    assert missing is None


def test_cursors_use_the_connections_loader_without_registering_their_own():
    with connection.cursor() as cursor:
        loader = cursor.cursor.adapters.get_loader(1184, Format.TEXT)
        assert loader.__name__ == "CTimestamptzLoader"
        assert loader.timezone == connection.timezone
        assert loader is connection.connection.adapters.get_loader(1184, Format.TEXT)  # none of its own
