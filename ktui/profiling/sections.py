"""Where inside a Triton kernel the time goes: Proton's intra-kernel scopes, read back as a table.

The kernel author marks regions with ``triton.profiler.language`` (``with pl.scope("load"):``);
``ktui profile PATH --sections`` runs one call under Proton's ``instrumentation`` backend, which
records clock counters at each scope boundary, and turns the tree Proton writes (``.hatchet``,
JSON) into named sections with their cycles and share. Outside a profile the scopes cost nothing:
Proton only lowers them while its instrumentation hook is active.

What the installed Triton offers decides what this can do, and ``proton_support``
(``ktui.worker.dsl.proton``, asked in the target process) says so plainly. Triton 3.5+ (3.6 on our H200, 3.9 here) instruments Gluon kernels by default and Triton
kernels only after ``proton.language.enable_semantic("triton")``, with the upstream warning that
Triton's own rewrites (pipelining, reordering) can blur scope boundaries: treat the shares as a
guide to where time goes, not as exact costs. Scopes inside loops are not supported upstream.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ktui.profiling.ncu import shape_text
from ktui.protocol.files import write_atomic

SUMMARY_FILE = "sections.json"
HATCHET_STEM = "sections"  # Proton writes <run_dir>/sections.hatchet


@dataclass
class Section:
    kernel: str
    path: list[str]  # scope names from the outermost scope down
    cycles: float
    share_pct: float  # of the kernel's outermost scopes together

    @property
    def name(self) -> str:
        return "/".join(self.path)


@dataclass
class SectionsReport:
    kernel: str
    version: int
    content_hash: str
    shape: dict
    device: str
    triton: str
    created: float
    hatchet_path: str
    sections: list[Section] = field(default_factory=list)
    metric: str = "cycles"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> SectionsReport:
        data = dict(data)
        sections = [Section(**s) for s in data.pop("sections", [])]
        return cls(sections=sections, **{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def text(self) -> str:

        lines = [f"{self.kernel} v{self.version} · Proton sections · {shape_text(self.shape)} · {self.device} · "
                 f"Triton {self.triton}"]
        if not self.sections:
            lines.append("no sections recorded")
            return "\n".join(lines)
        width = max(len("  " * (len(s.path) - 1) + s.path[-1]) for s in self.sections)
        current = None
        for s in self.sections:
            if s.kernel != current:
                current = s.kernel
                lines.append(f"{current}:")
                lines.append(f"  {'section':<{width}}  {self.metric:>14}  share")
            label = "  " * (len(s.path) - 1) + s.path[-1]
            lines.append(f"  {label:<{width}}  {s.cycles:>14,.0f}  {s.share_pct:5.1f}%")
        lines.append("shares are of the kernel's outermost scopes; Triton's rewrites can blur scope edges")
        return "\n".join(lines)


class NoSections(ValueError):
    """The profile recorded no scope: the kernel has none, or Proton dropped them."""


def _metric(metrics: dict) -> tuple[str, float] | None:
    for key in ("normalized_cycles", "cycles"):
        value = metrics.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return key, float(value)
    return None


def sections_from_tree(tree: Any) -> tuple[str, list[Section]]:
    """Proton's hatchet JSON → sections. A node with a cycle metric is a section; its kernel is the
    nearest ancestor without one (the launched kernel's frame)."""
    roots = tree if isinstance(tree, list) else [tree]
    found: list[tuple[str, list[str], float]] = []
    metric_used = "cycles"

    def walk(node: dict, ancestors: list[str], kernel: str, scope_path: list[str]) -> None:
        nonlocal metric_used
        if not isinstance(node, dict) or "frame" not in node:
            return
        name = str(node["frame"].get("name", "?"))
        measured = _metric(node.get("metrics") or {})
        if measured:
            metric_used = measured[0]
            path = [*scope_path, name]
            found.append((kernel, path, measured[1]))
            for child in node.get("children", []):
                walk(child, [*ancestors, name], kernel, path)
        else:
            for child in node.get("children", []):
                walk(child, [*ancestors, name], name, [])

    for root in roots:
        walk(root, [], "", [])
    sections = []
    totals: dict[str, float] = {}
    for kernel, path, cycles in found:
        if len(path) == 1:
            totals[kernel] = totals.get(kernel, 0.0) + cycles
    for kernel, path, cycles in found:
        total = totals.get(kernel) or 0.0
        sections.append(Section(kernel, path, cycles, round(100.0 * cycles / total, 2) if total else 0.0))
    return metric_used, sections


def read_hatchet(path: Path) -> tuple[str, list[Section]]:
    try:
        tree = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise NoSections(f"cannot read Proton's output {path}: {exc}") from exc
    metric, sections = sections_from_tree(tree)
    if not sections:
        raise NoSections(
            "Proton recorded no section: mark regions inside the kernel with "
            "`with pl.scope(\"name\"):` (import triton.profiler.language as pl), outside loops"
        )
    return metric, sections


def write(run_dir: Path, report: SectionsReport) -> None:

    write_atomic(Path(run_dir) / SUMMARY_FILE, json.dumps(report.to_json(), indent=2))


def load(run_dir: Path) -> SectionsReport | None:
    try:
        return SectionsReport.from_json(json.loads((Path(run_dir) / SUMMARY_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None
