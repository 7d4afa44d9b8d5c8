from django.core.management.base import CommandError

from memory_service.exceptions import ApplicationError


def parse_permissions(value: str | None) -> list[str] | None:
    """``"p1,p2"`` → ``["p1", "p2"]``; None keeps the service's default."""
    if value is None:
        return None
    return [p.strip() for p in value.split(",") if p.strip()]


def command_error(exc: ApplicationError) -> CommandError:
    """A domain error as a command-line error (exit status 1, message on stderr)."""
    fields = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in exc.fields.items())
    return CommandError(f"{exc.message}{f' ({fields})' if fields else ''}")
