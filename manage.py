#!/usr/bin/env python
"""Django's command-line utility; reads settings from the environment and `.env`."""

import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_service.settings.base")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
