"""What one profile boils down to (``NcuSummary``, a ``KernelProfile`` per kernel) and how it reads:
the JSON of ``ncu.json`` and the few lines of ``ncu.txt``. A leaf: the other modules build or store it."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class KernelProfile:
    name: str
    launches: int
    duration_us: float
    dram_pct: float | None
    sm_pct: float | None
    occupancy_pct: float | None
    registers: int | None
    shared_bytes: int | None
    l2_hit_pct: float | None
    stalls: list[tuple[str, float]]  # top warp-stall reasons, (reason, % of the stall samples/cycles)
    findings: list[dict]  # {"rule", "message", "est_speedup_pct", "type", "section"}
    block: str = ""
    grid: str = ""


@dataclass
class NcuSummary:
    kernel: str
    version: int
    content_hash: str
    shape: dict
    set: str
    device: str
    created: float
    report_path: str
    kernels: list[KernelProfile]
    total_duration_us: float
    notes: list[str] = field(default_factory=list)  # what the chosen set did not collect, and the like
    clock_control: str = "none"
    hotspots: dict = field(default_factory=dict)  # the hot lines (``ncu/source.py``'s ``aggregate``)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for k in data["kernels"]:
            k["stalls"] = [list(s) for s in k["stalls"]]
        return data

    @classmethod
    def from_json(cls, data: dict) -> NcuSummary:
        data = dict(data)
        kernels = []
        for k in data.pop("kernels", []):
            k = dict(k)
            k["stalls"] = [(str(r), float(p)) for r, p in k.get("stalls", [])]
            kernels.append(KernelProfile(**{f: k[f] for f in KernelProfile.__dataclass_fields__ if f in k}))
        known = {f: data[f] for f in cls.__dataclass_fields__ if f in data and f != "kernels"}
        return cls(kernels=kernels, **known)

    def text(self) -> str:
        """What ``ncu.txt`` holds: a few lines an agent (or a person) reads at a glance."""
        launches = sum(k.launches for k in self.kernels)
        lines = [
            f"{self.kernel} v{self.version} · ncu --set {self.set} · clock control {self.clock_control} · "
            f"{shape_text(self.shape)} · {self.device}",
            f"total {fmt_us(self.total_duration_us)} in {launches} launch(es) of {len(self.kernels)} kernel(s)",
        ]
        for k in self.kernels:
            lines.append(f"{k.name} ×{k.launches}  {fmt_us(k.duration_us)}  " + " · ".join(kernel_figures(k)))
            if k.stalls:
                lines.append("  stalls: " + ", ".join(f"{r} {p:.0f}%" for r, p in k.stalls))
            for f in k.findings:
                speedup = f" est. {f['est_speedup_pct']:.0f}%" if f.get("est_speedup_pct") is not None else ""
                lines.append(f"  [{f.get('type') or 'rule'}{speedup}] {f['rule']}: {first_sentence(f['message'])}")
        for k in self.hotspots.get("kernels", []):
            for x in k["hot_lines"][:5]:
                lines.append(f"  hot {self.hotspots['source']}:{x['line']} {x['share']:.0%} of samples: {x['reading']}"
                             f" — {x['text']}")
        lines.extend(f"note: {n}" for n in self.notes)
        if self.report_path:
            lines.append(f"report: {self.report_path} (opens in the Nsight Compute GUI)")
        return "\n".join(lines)


def shape_text(shape: dict) -> str:
    """``{"rows": 4096}`` → ``rows=4096`` (as rungs name their shapes)."""
    return ",".join(f"{k}={v}" for k, v in shape.items()) or "no shape"


def fmt_us(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"


def kernel_figures(k: KernelProfile) -> list[str]:
    """``DRAM 87%`` … — the figures of one kernel that were measured, in a fixed order."""
    out = []
    for label, value, unit in (
        ("DRAM", k.dram_pct, "%"),
        ("SM", k.sm_pct, "%"),
        ("occupancy", k.occupancy_pct, "%"),
        ("L2 hit", k.l2_hit_pct, "%"),
    ):
        if value is not None:
            out.append(f"{label} {value:.0f}{unit}")
    if k.registers is not None:
        out.append(f"{k.registers} regs")
    if k.shared_bytes is not None:
        out.append(f"{k.shared_bytes} B smem")
    return out


def first_sentence(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    sentence = match.group(1) if match else text
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"
