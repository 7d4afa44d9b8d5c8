"""The MCP interface: tools and a resource over streamable HTTP, thin wrappers on the services.

(Not named ``mcp``: a local package of that name would shadow the SDK.)
"""
