"""The SASS diff's value types and errors: a leaf, so every other module of the diff can name them."""

from __future__ import annotations

from dataclasses import dataclass, field

RESOURCE_KEYS = ("registers", "spill_instructions", "shared", "local", "stack")


class DiffError(Exception):
    """A diff cannot be made; the message says why, and each surface its own next step: the
    CLI's flags (``str(exc)``), the dashboard's keys (``in_dashboard``) or the MCP tools' arguments
    (``for_agents``)."""

    def __init__(self, reason: str, cli: str = "", dashboard: str = "", agents: str = ""):
        super().__init__(reason)
        self.reason, self.cli, self.dashboard, self.agents = reason, cli, dashboard, agents

    def __str__(self) -> str:
        return f"{self.reason}: {self.cli}" if self.cli else self.reason

    def in_dashboard(self) -> str:
        return f"{self.reason}: {self.dashboard}" if self.dashboard else self.reason

    def for_agents(self) -> str:
        return f"{self.reason}: {self.agents}" if self.agents else self.reason


class NoBase(DiffError):
    """There is no version to compare with (no earlier passing version, nothing pinned…)."""


class MissingSass(DiffError):
    """A version has no SASS on disk (its run stopped before the dumps rung)."""


@dataclass
class FunctionDiff:
    name: str  # GPU function symbol (the new version's, when a CuTeDSL symbol changed)
    status: str  # "changed" | "same" | "added" | "removed"
    instructions: tuple[int, int]  # (base, new), padding after the last EXIT excluded
    opcode_deltas: list[tuple[str, int, int]]  # (opcode, base, new), changed only, largest |delta| first
    resources: dict[str, tuple[int | None, int | None]]  # RESOURCE_KEYS → (base, new)
    unified: list[str]  # unified diff of the normalised listings
    family_deltas: list[tuple[str, int, int]] = field(default_factory=list)  # LDG, STL, BAR… (first opcode word)
    base_name: str = ""  # the base version's symbol when it differs from ``name``

    @property
    def changed(self) -> bool:
        return self.status != "same"
