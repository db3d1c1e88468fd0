"""What a process that runs user code says of its sandbox, in one line (``confinement``).

``landlock ABI 7: writes, reads, network, signals`` names the protections that held on this
machine; each one a machine could not give, or the user lifted, follows after ``; `` with why
(``landlock ABI 5: writes, reads, network; not held: signals (Landlock ABI 6)``). A process that
is not confined says ``not confined: <why>``. The line is quiet where everything held: the CLI and
the dashboard name it only when something did not (``warning``).
"""

from __future__ import annotations

GAP = "; "  # what follows is a protection that did not hold, and why

WRITES, READS, NETWORK, SIGNALS = "writes", "reads", "network", "signals"


def describe(abi: int, held: list[str], gaps: list[str]) -> str:
    """``landlock ABI 7: writes, reads, network, signals`` and, after ``GAP``, each gap."""
    return f"landlock ABI {abi}: {', '.join(held)}" + "".join(GAP + gap for gap in gaps)


def warning(confined: bool | None, confinement: str) -> str:
    """What a run's lines and the status line say of its sandbox: "" when every protection held
    (or nothing is known), else the whole line."""
    if confined is False:
        return confinement or "not confined"
    if confined and GAP in confinement:
        return confinement
    return ""
