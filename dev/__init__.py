"""Development tooling for this repository (the stack behind ``make run`` and ``make test``).

Not part of the installed application: it runs from a checkout, as ``python -m dev.stack``.
"""
