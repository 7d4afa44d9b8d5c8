"""Django's PostgreSQL backend, with timestamps parsed by psycopg's C loader.

Django registers a ``timestamptz`` loader written in Python (``psycopg_any.BaseTzLoader``, built on
psycopg's pure-Python loader) to give every datetime its configured time zone. A search reads
~70 timestamps and a page of the memory list ~250, each parsed in Python (bench/perf/analysis.md).
``CTimestamptzLoader`` parses with the C loader of ``psycopg[binary]`` and converts to the same
time zone, so values are identical.
"""

from django.conf import settings
from django.db.backends.postgresql import base
from psycopg import adapters
from psycopg.adapt import Loader
from psycopg.pq import Format

_TIMESTAMPTZ_OID = adapters.types["timestamptz"].oid


def c_timestamptz_loader(timezone) -> type[Loader]:
    """A ``timestamptz`` text loader that returns aware datetimes in ``timezone``.

    It has the ``timezone`` attribute Django's cursors compare with their connection's time zone
    (``DatabaseWrapper.create_cursor``): the same time zone, so no cursor re-registers its own.
    """
    parser = adapters.get_loader(_TIMESTAMPTZ_OID, Format.TEXT)

    class CTimestamptzLoader(Loader):
        def __init__(self, oid, context=None):
            super().__init__(oid, context)
            self._parse = parser(oid, context).load

        def load(self, data):
            return self._parse(data).astimezone(timezone)

    CTimestamptzLoader.timezone = timezone
    return CTimestamptzLoader


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        params = super().get_connection_params()
        if settings.USE_TZ and "context" in params:
            params["context"].register_loader("timestamptz", c_timestamptz_loader(self.timezone))
        return params
