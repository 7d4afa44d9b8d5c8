"""Model instances from rows read with hand-written SQL, converted exactly as the ORM converts them.

For the hot paths whose statements the ORM cannot express, or would compile on every request
(authentication, candidates): name the columns with ``columns``, read them, and build instances
with ``model_from_row``.
"""

from functools import cache
from typing import TypeVar

from django.db import connections
from django.db.models import Field, Model

_M = TypeVar("_M", bound=Model)


def concrete_fields(model: type[Model], *, exclude: tuple[str, ...] = ()) -> tuple[Field, ...]:
    """The model's concrete fields, in declaration order, without the attnames in ``exclude``."""
    return tuple(f for f in model._meta.concrete_fields if f.attname not in exclude)


def columns(fields: tuple[Field, ...], *, table_alias: str) -> str:
    """``alias."column", …`` for ``fields``, in their order."""
    return ", ".join(f'{table_alias}."{f.column}"' for f in fields)


@cache
def _loading(fields: tuple[Field, ...], alias: str) -> tuple[list[str], tuple[tuple[int, list, object], ...]]:
    """The fields' attnames, and (position, converters, column) for the fields whose database
    values the ORM converts: worked out once per field list, not per row."""
    conn = connections[alias]
    found = []
    for index, field in enumerate(fields):
        col = field.get_col(field.model._meta.db_table)
        converters = conn.ops.get_db_converters(col) + field.get_db_converters(conn)
        if converters:
            found.append((index, converters, col))
    return [f.attname for f in fields], tuple(found)


def model_from_row(model: type[_M], fields: tuple[Field, ...], values, *, alias: str) -> _M:
    """An instance of ``model`` from the values of ``fields`` (in that order), as loaded by the ORM
    (JSON decoded by its field, not by the driver)."""
    attnames, converted = _loading(fields, alias)
    values = list(values)
    conn = connections[alias]
    for index, converters, col in converted:
        for converter in converters:
            values[index] = converter(values[index], col, conn)
    return model.from_db(alias, attnames, values)
