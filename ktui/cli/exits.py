"""What ``ktui``'s exit status means, shared by every command (see ``ktui.cli.main``)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CANNOT_RUN = 2
EXIT_SUSPICIOUS = 3
# A test that proves nothing: ``ktui audit``'s weak reference, ``ktui run --strict``'s pass that cannot be
# trusted (``ktui.dispatch.trust``) where every kernel passed.
EXIT_UNTRUSTED = 4


def exit_stopped(signum: int) -> int:
    """A command stopped by a signal exits 128 + the signal, as a shell reports it (130 for Ctrl-C):
    its runs are recorded ``cancelled``, and this code, not their verdict's, is its status."""
    return 128 + signum


# Verdicts that exit 0: ``compiled`` (a CuTeDSL kernel on the CPU tier: compiled and dumped, not
# run) is not a pass, but nothing went wrong, and ``ktui run kernels/`` on a CPU machine must succeed.
CLEAN = ("passed", "compiled")


def exit_code(verdicts: list[str], asked: int = 0) -> int:
    """The status of a run of several kernels: the worst verdict wins; fewer verdicts than the
    ``asked`` kernels (one ended with none) is "could not run", never a success."""
    if "error" in verdicts or len(verdicts) < asked:
        return EXIT_CANNOT_RUN
    if "suspicious" in verdicts:
        return EXIT_SUSPICIOUS
    if any(v not in CLEAN for v in verdicts):
        return EXIT_FAILED
    return EXIT_OK
