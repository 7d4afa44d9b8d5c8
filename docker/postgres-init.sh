#!/usr/bin/env bash
# Database set-up for memory-service, run by the official postgres image's entrypoint from
# /docker-entrypoint-initdb.d/: once, as the superuser, when the data volume is empty.
#
# - the extensions vector and pg_trgm, in template1 (so databases created later, such as test
#   databases, have them) and in $POSTGRES_DB; creating them needs a superuser;
# - memory_owner: owns the database and its public schema, runs migrations, may bypass RLS;
# - memory_app: the application's role, always under row-level security; its table privileges
#   are granted by the migrations.
#
# Passwords reach psql as variables and are quoted by psql (:'name'), never pasted into SQL.
set -eo pipefail

: "${POSTGRES_DB:?POSTGRES_DB is not set}"
: "${MEMORY_OWNER_PASSWORD:?set MEMORY_OWNER_PASSWORD}"
: "${MEMORY_APP_PASSWORD:?set MEMORY_APP_PASSWORD}"

memory_service_psql() {
    psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" "$@"
}

memory_service_psql --dbname postgres \
    -v owner_password="$MEMORY_OWNER_PASSWORD" \
    -v app_password="$MEMORY_APP_PASSWORD" \
    -v db_name="$POSTGRES_DB" <<'SQL'
CREATE ROLE memory_owner LOGIN CREATEDB BYPASSRLS NOSUPERUSER PASSWORD :'owner_password';
CREATE ROLE memory_app LOGIN NOCREATEDB NOBYPASSRLS NOSUPERUSER PASSWORD :'app_password';
ALTER DATABASE :"db_name" OWNER TO memory_owner;
SQL

memory_service_psql --dbname template1 <<'SQL'
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gin;
SQL

memory_service_psql --dbname "$POSTGRES_DB" <<'SQL'
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gin;
ALTER SCHEMA public OWNER TO memory_owner;
SQL
