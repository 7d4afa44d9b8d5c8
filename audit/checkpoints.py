"""Checkpoints of the audit chains, kept outside PostgreSQL.

The HMAC chain proves that no event was changed, inserted or removed before a chain's newest
event, but not that the newest events are still there: whoever may delete rows can cut a chain's
tail and what remains still verifies. A checkpoint records a chain's head (tenant, seq, hash,
time), signed with a key derived from ``AUDIT_HMAC_KEY``, in a store the database does not hold;
``verify_audit`` compares every chain with its tenant's latest checkpoint. Events newer than that
checkpoint are not covered: deleting them leaves no trace.

A store is any class with ``append``, ``latest`` and ``tenant_ids`` (``CheckpointStore``), named
by the ``AUDIT_CHECKPOINT_STORE`` setting; ``FileCheckpointStore`` is the default.
"""

import fcntl
import hashlib
import hmac
import json
import logging
import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.utils.module_loading import import_string

from audit.chain import purpose_key

logger = logging.getLogger(__name__)

SIGNING_PURPOSE = "audit-checkpoint"


@dataclass(frozen=True)
class Checkpoint:
    """One chain head as it was at ``at``: ``seq`` events, the last of which has link ``hash``.

    ``by`` names the writer (``schedule``, ``verify_audit``); ``signature`` covers every other field.
    """

    tenant_id: str
    seq: int
    hash: str
    at: datetime
    by: str
    signature: str

    def payload(self) -> bytes:
        """The bytes the signature covers."""
        return json.dumps(
            {"tenant": self.tenant_id, "seq": self.seq, "hash": self.hash,
             "at": self.at.isoformat(timespec="microseconds"), "by": self.by},
            sort_keys=True, separators=(",", ":"),
        ).encode()  # fmt: skip

    def to_json(self) -> str:
        """One line of JSON (no newline), as stores keep it."""
        return json.dumps(json.loads(self.payload()) | {"sig": self.signature}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> "Checkpoint":
        """Parse what ``to_json`` wrote; ValueError for anything else. The signature is not checked."""
        try:
            record = json.loads(text)
            checkpoint = cls(
                tenant_id=str(uuid.UUID(record["tenant"])), seq=int(record["seq"]), hash=str(record["hash"]),
                at=datetime.fromisoformat(record["at"]), by=str(record["by"]), signature=str(record["sig"]),
            )  # fmt: skip
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a checkpoint: {exc!r}") from exc
        if checkpoint.at.tzinfo is None:
            raise ValueError("not a checkpoint: its time has no timezone")
        return checkpoint


def _signature(payload: bytes) -> str:
    return hmac.new(purpose_key(SIGNING_PURPOSE), payload, hashlib.sha256).hexdigest()


def checkpoint_sign(*, tenant_id, seq: int, hash: str, at: datetime, by: str) -> Checkpoint:
    """A checkpoint of ``tenant_id``'s chain head, signed with the checkpoint key."""
    unsigned = Checkpoint(tenant_id=str(tenant_id), seq=seq, hash=hash, at=at, by=by, signature="")
    return replace(unsigned, signature=_signature(unsigned.payload()))


def checkpoint_valid(checkpoint: Checkpoint, *, tenant_id) -> bool:
    """True when ``checkpoint`` was signed with this service's key and is ``tenant_id``'s.

    A checkpoint that fails this was not written by the service (or was altered): it must be
    reported and never trusted."""
    return str(checkpoint.tenant_id) == str(tenant_id) and hmac.compare_digest(
        checkpoint.signature, _signature(checkpoint.payload())
    )


class CheckpointStore(ABC):
    """Where checkpoints are kept, outside the database: append-only, one sequence per tenant.

    The store is trusted to keep what was appended; it need not check signatures (readers do). A
    store that whoever controls the database cannot write (another host, an object store with
    object lock, a log service) is what makes the checkpoints worth having.
    """

    @abstractmethod
    def append(self, checkpoint: Checkpoint) -> None:
        """Keep ``checkpoint`` durably after the tenant's earlier ones before returning."""

    @abstractmethod
    def latest(self, tenant_id) -> Checkpoint | None:
        """The tenant's most recently appended checkpoint, or None when it has none."""

    @abstractmethod
    def tenant_ids(self) -> list[str]:
        """Ids of every tenant with at least one checkpoint."""


class FileCheckpointStore(CheckpointStore):
    """One file of JSON lines per tenant, ``<directory>/<tenant_id>.jsonl``, appended and fsynced.

    ``directory`` defaults to the ``AUDIT_CHECKPOINT_DIR`` setting. Concurrent writers serialise on
    an exclusive lock of the file. A line cut short by a crash is skipped by readers, and the next
    append starts on a line of its own.
    """

    SUFFIX = ".jsonl"
    BLOCK = 8192

    def __init__(self, directory: str | os.PathLike | None = None):
        self.directory = Path(directory if directory is not None else settings.AUDIT_CHECKPOINT_DIR)

    def _path(self, tenant_id) -> Path:
        return self.directory / f"{uuid.UUID(str(tenant_id))}{self.SUFFIX}"

    def append(self, checkpoint: Checkpoint) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(checkpoint.tenant_id)
        created = not path.exists()
        line = checkpoint.to_json().encode() + b"\n"
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # the last append was cut short: keep this one readable
            written = 0
            while written < len(line):
                written += os.write(fd, line[written:])
            os.fsync(fd)
        finally:
            os.close(fd)  # releases the lock
        if created:  # the new file's directory entry must survive a crash too
            directory = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)

    def latest(self, tenant_id) -> Checkpoint | None:
        path = self._path(tenant_id)
        if not path.exists():
            return None
        for line in self._lines_from_the_end(path):
            try:
                return Checkpoint.from_json(line)
            except ValueError:
                logger.warning("audit checkpoint store: skipped an unreadable line", extra={"path": str(path)})
        return None

    def _lines_from_the_end(self, path: Path) -> Iterator[bytes]:
        """The file's non-empty lines, last first, reading only as much of the file as needed."""
        with open(path, "rb") as file:
            end = file.seek(0, os.SEEK_END)
            rest = b""
            while end > 0:
                start = max(0, end - self.BLOCK)
                file.seek(start)
                rest = file.read(end - start) + rest
                end = start
                *complete, rest = reversed(rest.split(b"\n"))  # rest: a line that may begin further back
                yield from (line for line in complete if line.strip())
            if rest.strip():
                yield rest

    def tenant_ids(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        ids = []
        for path in self.directory.glob(f"*{self.SUFFIX}"):
            try:
                ids.append(str(uuid.UUID(path.name.removesuffix(self.SUFFIX))))
            except ValueError:
                continue  # not a tenant's file
        return sorted(ids)


def checkpoint_store() -> CheckpointStore:
    """The store the ``AUDIT_CHECKPOINT_STORE`` setting names, made with no arguments."""
    return import_string(settings.AUDIT_CHECKPOINT_STORE)()
