"""Settings for the test suite: the same as production, with a throwaway test database.

The test database is created and migrated by the `admin` alias (the role that owns the schema);
`default` mirrors it with the application's role, so tests run under row-level security exactly
as the service does.
"""

from .base import *  # noqa: F403
from .base import DATABASES

DATABASES["admin"]["TEST"] = {"NAME": "test_memory_service"}
DATABASES["default"]["TEST"] = {"MIRROR": "admin"}

# Fast hashing in tests; PBKDF2 too, for users that the live server (production settings) checks.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# A test's data is uncommitted in its transaction, which a side connection cannot see: searches
# run their stages one after the other, except in tests/memories/test_side_connection.py and the
# live-server tests (committed data; the server runs the production settings).
SEARCH_SIDE_CONNECTIONS = 0
