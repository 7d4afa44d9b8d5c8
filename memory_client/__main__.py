"""``python -m memory_client``: the same as the ``memory-service`` command."""

import sys

from memory_client.cli import main

sys.exit(main())
