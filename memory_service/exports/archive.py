"""What an export archive holds, and writing it: one JSON Lines file per kind plus ``manifest.json``.

Rows are streamed from the database (``.iterator(chunk_size=…)``) straight into the zip, with the
SHA-256 and the row count of each file computed on the way, so memory use does not grow with the
tenant. Memory text is stored masked, so the archive holds masked text only. Audit events hold
user ids only as pseudonyms.

A whole-tenant export holds every memory, supersession link and audit event of the tenant, and,
where the proposals app provides them, proposals and AGENTS.md versions. A user export holds the
memories that user wrote or owns (any scope), the supersession links touching them, and the audit
events that name the user's pseudonym (as author, user or token binding); proposals and AGENTS.md
versions belong to repositories, not to users, and are left out.
"""

import hashlib
import io
import json
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Q, QuerySet
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import user_pseudonym
from memory_service.memories.models import Memory, Supersession
from proposals.models import AgentsDocumentVersion, Proposal
from tenants.models import Tenant

MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 1

MEMORY_FIELDS = (
    "id", "scope", "user", "repository", "session", "name", "author", "kind", "priority", "confidence", "lifecycle",
    "title", "text", "tags", "metadata", "solved_query", "external_id", "origin", "source_client", "masker_version",
    "embedding_status", "embedding_model", "occurred_at", "thread_previous_id", "valid_until", "expires_at",
    "created_at", "updated_at",
)  # fmt: skip
SUPERSESSION_FIELDS = ("old_id", "new_id", "partial", "created_at")
AUDIT_FIELDS = ("seq", "at", "actor", "action", "resource_type", "resource_ids", "details", "prev_hash", "hash")
# Exported whole in a tenant export (they carry no user id: a user export leaves them out).
DOCUMENT_MODELS = {"proposals.jsonl": Proposal, "agents_md_versions.jsonl": AgentsDocumentVersion}


@dataclass(frozen=True)
class Section:
    """One JSON Lines file: its name and the rows (dicts) that fill it, in a stable order."""

    name: str
    rows: QuerySet


def user_memories(*, tenant: Tenant, user: str) -> QuerySet[Memory]:
    """Memories ``user`` wrote or owns, in every scope."""
    return Memory.objects.for_tenant(tenant).filter(Q(user=user) | Q(author=user))


def _pseudonym_q(pseudonym: str) -> Q:
    return Q(details__author=pseudonym) | Q(details__user=pseudonym) | Q(details__bound_user=pseudonym)


def sections(*, tenant: Tenant, user: str = "") -> list[Section]:
    """The files of an export of ``tenant`` (of one user's data when ``user`` is given)."""
    memories = Memory.objects.for_tenant(tenant)
    links = Supersession.objects.for_tenant(tenant)
    events = AuditEvent.objects.for_tenant(tenant)
    if user:
        memories = user_memories(tenant=tenant, user=user)
        mine = memories.values("id")
        links = links.filter(Q(old__in=mine) | Q(new__in=mine))
        events = events.filter(_pseudonym_q(user_pseudonym(user)))
    result = [
        Section("memories.jsonl", memories.order_by("created_at", "id").values(*MEMORY_FIELDS)),
        Section("supersessions.jsonl", links.order_by("id").values(*SUPERSESSION_FIELDS)),
        Section("audit_events.jsonl", events.order_by("seq").values(*AUDIT_FIELDS)),
    ]
    if not user:
        for name, model in DOCUMENT_MODELS.items():
            fields = [f.attname for f in model._meta.concrete_fields if f.attname != "tenant_id"]
            result.append(Section(name, model.objects.for_tenant(tenant).order_by("pk").values(*fields)))
    return result


def _lines(rows: QuerySet, chunk_size: int) -> Iterator[bytes]:
    for row in rows.iterator(chunk_size=chunk_size):
        yield json.dumps(row, cls=DjangoJSONEncoder, ensure_ascii=False, sort_keys=True).encode() + b"\n"


@dataclass
class ArchiveResult:
    counts: dict[str, int]
    manifest: dict


def write_archive(
    *,
    fileobj: io.BufferedIOBase,
    tenant: Tenant,
    user: str,
    job_id: str,
    chunk_size: int,
    on_rows: Callable[[int], None],
) -> ArchiveResult:
    """Write the archive of ``tenant`` (or ``user``) to ``fileobj``; ``on_rows(n)`` after each chunk.

    Must run inside the tenant's transaction; a REPEATABLE READ one makes every file agree.
    """
    files = []
    with zipfile.ZipFile(fileobj, mode="w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for section in sections(tenant=tenant, user=user):
            digest, count, pending = hashlib.sha256(), 0, 0
            with archive.open(section.name, mode="w", force_zip64=True) as member:
                for line in _lines(section.rows, chunk_size):
                    member.write(line)
                    digest.update(line)
                    count += 1
                    pending += 1
                    if pending == chunk_size:
                        on_rows(pending)
                        pending = 0
            on_rows(pending)
            files.append({"name": section.name, "sha256": digest.hexdigest(), "count": count})
        manifest = {
            "format": FORMAT_VERSION,
            "export_id": job_id,
            "tenant": tenant.slug,
            "tenant_id": str(tenant.id),
            "user": user_pseudonym(user) if user else None,
            "created_at": timezone.now().isoformat(),
            "files": files,
        }
        archive.writestr(MANIFEST_NAME, json.dumps(manifest, indent=2, sort_keys=True))
    return ArchiveResult(counts={f["name"].removesuffix(".jsonl"): f["count"] for f in files}, manifest=manifest)


def section_totals(*, tenant: Tenant, user: str = "") -> int:
    """How many rows the archive will hold (for progress)."""
    return sum(section.rows.count() for section in sections(tenant=tenant, user=user))


def verify_archive(path) -> dict:
    """Check every file of an archive against its manifest; returns the manifest.

    Raises ValueError naming the first file whose checksum or count differs.
    """
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read(MANIFEST_NAME))
        for entry in manifest["files"]:
            digest, count = hashlib.sha256(), 0
            with archive.open(entry["name"]) as member:
                for line in member:
                    digest.update(line)
                    count += 1
            if digest.hexdigest() != entry["sha256"] or count != entry["count"]:
                raise ValueError(f"{entry['name']} does not match the manifest")
    return manifest
