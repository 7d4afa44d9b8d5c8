"""What every app's REST interface shares: the strict input serializer, the cursor filter base
and the paginator. Errors and their one shape are in ``memory_service.exceptions``."""
