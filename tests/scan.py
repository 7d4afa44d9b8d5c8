"""Where a value could be stored: every text column of the database, every key of Redis."""

from django.db import connections


def database_occurrences(needle: str, *, skip: tuple[str, ...] = ()) -> list[str]:
    """Every ``table.column`` holding ``needle`` in any text, varchar, array, json or tsvector column,
    read as the schema owner (past RLS), like a scan of a pg_dump."""
    found = []
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND data_type IN "
            "('text', 'character varying', 'jsonb', 'json', 'ARRAY', 'tsvector')"
        )
        for table, column in cursor.fetchall():
            if table in skip:
                continue
            cursor.execute(f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s', [f"%{needle}%"])
            if cursor.fetchone()[0]:
                found.append(f"{table}.{column}")
    return found


def redis_dump(url: str) -> bytes:
    """Every key and value of one Redis database, concatenated (strings, lists, hashes, sets, sorted sets)."""
    import redis

    client = redis.Redis.from_url(url)
    chunks = []
    for key in client.scan_iter(count=500):
        chunks.append(key)
        kind = client.type(key).decode()
        if kind == "string":
            chunks.append(client.get(key) or b"")
        elif kind == "list":
            chunks.extend(client.lrange(key, 0, -1))
        elif kind == "hash":
            for field, value in client.hgetall(key).items():
                chunks += [field, value]
        elif kind == "set":
            chunks.extend(client.smembers(key))
        elif kind == "zset":
            chunks.extend(client.zrange(key, 0, -1))
    return b"\n".join(chunks)
