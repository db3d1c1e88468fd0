"""What ``ktui``'s exit status means, shared by every command (see ``ktui.cli.main``)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CANNOT_RUN = 2
EXIT_SUSPICIOUS = 3


def exit_code(verdicts: list[str]) -> int:
    """The status of a run of several kernels: the worst verdict wins."""
    if "error" in verdicts:
        return EXIT_CANNOT_RUN
    if "suspicious" in verdicts:
        return EXIT_SUSPICIOUS
    if any(v != "passed" for v in verdicts):
        return EXIT_FAILED
    return EXIT_OK
