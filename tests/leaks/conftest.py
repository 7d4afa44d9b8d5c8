from tests.leaks.helpers import RUN


def pytest_terminal_summary(terminalreporter):
    """The seed of this run's canary values, to repeat them (``LEAK_SCAN_SEED=…``)."""
    terminalreporter.write_line(f"leak scan values: LEAK_SCAN_SEED={RUN}")
