"""The command-line client of memory-service (``memory-service``, ``memory-service-mcp``).

It speaks to a running service over HTTP only: it imports neither Django nor the server package.
"""
