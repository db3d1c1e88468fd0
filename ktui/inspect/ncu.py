"""Nsight Compute results as the handful of figures that explain a kernel's time.

ncu exports a report as CSV in two shapes: the *raw* page (one row per kernel launch, one column
per metric, a second row of units) and the *details* page (one row per section metric, plus rows
for ncu's rule findings with their estimated speedups). Both are read by column name, never by
position: ncu versions add columns. Several launches of one kernel are folded into one
``KernelProfile``; several kernels per ``custom_kernel`` (a two-pass algorithm) give one each plus
the total. No torch or triton imports: the dashboard reads ``ncu.json`` through this module.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ktui.protocol import statedir

SUMMARY_FILE = "ncu.json"
TEXT_FILE = "ncu.txt"
REPORT_STEM = "profile"  # ncu -o <run_dir>/profile → profile.ncu-rep
TOP_STALLS = 4
TOP_FINDINGS = 4


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


# -- CSV -------------------------------------------------------------------------------------------


class NcuParseError(ValueError):
    """The text is not an ncu CSV export."""


def csv_rows(text: str) -> list[dict[str, str]]:
    """The rows of an ncu CSV export, keyed by header. ncu's own ``==PROF==`` lines and the
    profiled program's output may surround the table; they are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith('"ID"')), None)
    if start is None:
        raise NcuParseError('no ncu CSV table found (expected a header line starting with "ID")')
    body = [line for line in lines[start:] if line.strip() and not line.startswith("==")]
    reader = csv.reader(io.StringIO("\n".join(body)))
    header = [h.strip() for h in next(reader)]
    rows = []
    for fields in reader:
        rows.append({h: (fields[i] if i < len(fields) else "") for i, h in enumerate(header)})
    return rows


def number(text: str | None) -> float | None:
    """``"1,234.5"`` → 1234.5; ``"n/a"``, ``""`` → None."""
    if text is None:
        return None
    cleaned = text.strip().replace(",", "")
    if not cleaned:
        return None
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ncu's base unit of time is the nanosecond: a duration with no unit (no units row) is in ns.
_TIME_TO_US = {"": 1e-3, "ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "µs": 1.0, "ms": 1e3, "msecond": 1e3,
               "s": 1e6, "second": 1e6}
_BYTES = {"byte": 1, "bytes": 1, "kbyte": 1000, "mbyte": 1000**2, "gbyte": 1000**3, "kib": 1024, "mib": 1024**2}


def to_us(value: float | None, unit: str) -> float | None:
    if value is None:
        return None
    factor = _TIME_TO_US.get(unit.strip().lower())
    if factor is None:
        raise NcuParseError(f"unknown time unit {unit!r}")
    return value * factor


def to_bytes(value: float | None, unit: str) -> int | None:
    if value is None:
        return None
    base = unit.strip().lower().split("/", 1)[0]  # "byte/block"
    factor = _BYTES.get(base or "byte")
    if factor is None:
        raise NcuParseError(f"unknown size unit {unit!r}")
    return round(value * factor)


@dataclass
class Launch:
    """One profiled kernel launch: its metrics as ``{name: (text, unit)}``."""

    id: str
    kernel: str
    block: str
    grid: str
    metrics: dict[str, tuple[str, str]] = field(default_factory=dict)
    details: dict[str, tuple[str, str]] = field(default_factory=dict)  # details page, by "Section/Metric"
    rules: list[dict] = field(default_factory=list)

    def value(self, name: str) -> float | None:
        entry = self.metrics.get(name)
        return number(entry[0]) if entry else None

    def unit(self, name: str) -> str:
        entry = self.metrics.get(name)
        return entry[1] if entry else ""


_ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC", "Kernel Time"}


def parse_raw(text: str) -> list[Launch]:
    """The raw page (``ncu --csv --page raw``): one Launch per row, units from the units row."""
    rows = csv_rows(text)
    units: dict[str, str] = {}
    launches: list[Launch] = []
    for row in rows:
        if not row.get("ID", "").strip():  # the units row
            units = {k: v for k, v in row.items()}
            continue
        metrics = {k: (v, units.get(k, "")) for k, v in row.items() if k not in _ID_COLUMNS}
        launches.append(Launch(row["ID"].strip(), row.get("Kernel Name", "").strip(), row.get("Block Size", ""),
                               row.get("Grid Size", ""), metrics))
    return launches


def parse_details(text: str) -> list[Launch]:
    """The details page (``ncu --csv --page details``): section metrics and rule findings per launch."""
    rows = csv_rows(text)
    if rows and "Metric Name" not in rows[0]:
        raise NcuParseError("not a details page: no 'Metric Name' column")
    by_id: dict[str, Launch] = {}
    for row in rows:
        launch_id = row.get("ID", "").strip()
        if not launch_id:
            continue
        launch = by_id.get(launch_id)
        if launch is None:
            launch = by_id[launch_id] = Launch(launch_id, row.get("Kernel Name", "").strip(), row.get("Block Size", ""),
                                               row.get("Grid Size", ""))
        rule = (row.get("Rule Name") or "").strip()
        if rule:
            launch.rules.append({
                "rule": rule,
                "type": (row.get("Rule Type") or "").strip(),
                "message": (row.get("Rule Description") or "").strip(),
                "est_speedup_pct": number(row.get("Estimated Speedup")),
                "speedup_type": (row.get("Estimated Speedup Type") or "").strip(),
                "section": (row.get("Section Name") or "").strip(),
            })
        name = (row.get("Metric Name") or "").strip()
        if name:
            key = f"{(row.get('Section Name') or '').strip()}/{name}"
            launch.details[key] = ((row.get("Metric Value") or "").strip(), (row.get("Metric Unit") or "").strip())
    return list(by_id.values())


def merge(raw: list[Launch], details: list[Launch]) -> list[Launch]:
    """Attach each launch's details-page metrics and rules to its raw-page launch (by ID)."""
    extra = {d.id: d for d in details}
    if not raw:
        return details
    for launch in raw:
        d = extra.get(launch.id)
        if d is not None:
            launch.details, launch.rules = d.details, d.rules
    return raw


# -- from one launch to figures --------------------------------------------------------------------

RAW = {
    "duration": ("gpu__time_duration.sum",),
    "dram": ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    "sm": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "registers": ("launch__registers_per_thread",),
    "l2_hit": ("lts__t_sector_hit_rate.pct",),
}
SHARED_RAW = ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic")
DETAILS = {  # the same figures as the details page labels them (any section)
    "duration": "Duration",
    "dram": "DRAM Throughput",
    "sm": "Compute (SM) Throughput",
    "occupancy": "Achieved Occupancy",
    "registers": "Registers Per Thread",
    "l2_hit": "L2 Hit Rate",
}
SHARED_DETAILS = ("Static Shared Memory Per Block", "Dynamic Shared Memory Per Block")

# Warp-stall metrics, in order of preference: the first family present in a launch is used.
# Each yields {reason: value}; shares are value / sum over reasons.
STALL_FAMILIES = (
    re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$"),
    re.compile(r"^smsp__average_warp_latency_issue_stalled_(\w+?)(?:\.ratio|\.pct|\.sum)?$"),
    re.compile(r"^smsp__warp_issue_stalled_(\w+?)_per_warp_active\.pct$"),
    re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+)$"),
)
NOT_A_STALL = {"selected"}  # the cycle a warp issues: shown by ncu beside the stalls, but not one


def _detail(launch: Launch, label: str) -> tuple[float | None, str]:
    for key, (value, unit) in launch.details.items():
        if key.split("/", 1)[1] == label:
            return number(value), unit
    return None, ""


def _figure(launch: Launch, what: str) -> tuple[float | None, str]:
    for name in RAW[what]:
        value = launch.value(name)
        if value is not None:
            return value, launch.unit(name)
    return _detail(launch, DETAILS[what])


def stalls_of(launch: Launch) -> list[tuple[str, float]]:
    """Warp-stall reasons as % of all stall cycles/samples, largest first."""
    for family in STALL_FAMILIES:
        values: dict[str, float] = {}
        for name in launch.metrics:
            match = family.match(name)
            if not match or name.endswith("_not_issued"):
                continue
            value = launch.value(name)
            reason = match.group(1)
            if value is not None and reason not in NOT_A_STALL:
                values[reason] = values.get(reason, 0.0) + value
        total = sum(values.values())
        if total > 0:
            shares = [(r, 100.0 * v / total) for r, v in values.items() if v > 0]
            return sorted(shares, key=lambda s: (-s[1], s[0]))
    return []


def _shared(launch: Launch) -> int | None:
    parts = [(launch.value(n), launch.unit(n)) for n in SHARED_RAW]
    if all(v is None for v, _ in parts):
        parts = [_detail(launch, label) for label in SHARED_DETAILS]
    known = [to_bytes(v, u) for v, u in parts if v is not None]
    return sum(known) if known else None


def _findings(launches: Iterable[Launch]) -> list[dict]:
    """The rule results worth reading: optimisation hints and warnings, biggest estimated win first."""
    best: dict[tuple[str, str], dict] = {}
    for launch in launches:
        for rule in launch.rules:
            if rule["type"] == "INF" and rule["est_speedup_pct"] is None:
                continue
            key = (rule["rule"], first_sentence(rule["message"]))
            old = best.get(key)
            if old is None or (rule["est_speedup_pct"] or 0) > (old["est_speedup_pct"] or 0):
                best[key] = {k: rule[k] for k in ("rule", "message", "est_speedup_pct", "type", "section")}
    ranked = sorted(best.values(), key=lambda r: (-(r["est_speedup_pct"] if r["est_speedup_pct"] is not None else -1),
                                                    r["rule"]))
    return ranked[:TOP_FINDINGS]


def summarise_launches(launches: list[Launch]) -> list[KernelProfile]:
    """Fold launches into one KernelProfile per kernel name, in order of first launch."""
    groups: dict[str, list[Launch]] = {}
    for launch in launches:
        groups.setdefault(launch.kernel, []).append(launch)
    profiles = []
    for name, group in groups.items():
        durations = []
        for launch in group:
            value, unit = _figure(launch, "duration")
            durations.append(to_us(value, unit) if value is not None else None)
        weights = [d if d else 1.0 for d in durations]

        def mean(what: str, group: list = group, weights: list = weights) -> float | None:
            pairs = [(_figure(l, what)[0], w) for l, w in zip(group, weights)]
            pairs = [(v, w) for v, w in pairs if v is not None]
            return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None

        registers = [_figure(l, "registers")[0] for l in group]
        shared = [_shared(l) for l in group]
        stall_sums: dict[str, float] = {}
        stalled = [(stalls_of(l), w) for l, w in zip(group, weights)]
        stalled = [(s, w) for s, w in stalled if s]
        for shares, w in stalled:
            for reason, pct in shares:
                stall_sums[reason] = stall_sums.get(reason, 0.0) + pct * w
        weight = sum(w for _, w in stalled)
        stalls = sorted(((r, v / weight) for r, v in stall_sums.items()), key=lambda s: (-s[1], s[0]))[:TOP_STALLS]
        profiles.append(KernelProfile(
            name=name,
            launches=len(group),
            duration_us=sum(d for d in durations if d is not None),
            dram_pct=_round(mean("dram")),
            sm_pct=_round(mean("sm")),
            occupancy_pct=_round(mean("occupancy")),
            registers=int(max(r for r in registers if r is not None)) if any(r is not None for r in registers) else None,
            shared_bytes=max((s for s in shared if s is not None), default=None),
            l2_hit_pct=_round(mean("l2_hit")),
            stalls=[(r, round(p, 1)) for r, p in stalls],
            findings=_findings(group),
            block=group[0].block,
            grid=group[0].grid,
        ))
    return profiles


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def missing_notes(profiles: list[KernelProfile]) -> list[str]:
    """Say which figures the collected sections did not provide, instead of leaving blanks unexplained."""
    notes = []
    for label, attr in (("L2 hit rate", "l2_hit_pct"), ("achieved occupancy", "occupancy_pct"),
                        ("DRAM throughput", "dram_pct")):
        if profiles and all(getattr(p, attr) is None for p in profiles):
            notes.append(f"{label} was not collected")
    if profiles and not any(p.stalls for p in profiles):
        notes.append("warp-stall reasons were not collected")
    return notes


def device_name(launches: list[Launch]) -> str:
    for launch in launches:
        entry = launch.metrics.get("device__attribute_display_name")
        if entry and entry[0].strip():
            return entry[0].strip()
    return ""


# -- the ncu_report module (ships with Nsight Compute in extras/python) ---------------------------


def launches_from_report(module: Any, report: Path) -> list[Launch]:
    """Raw metrics per launch through NVIDIA's ``ncu_report`` Python module."""
    context = module.load_report(str(report))
    launches = []
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            metrics: dict[str, tuple[str, str]] = {}
            string_kind = getattr(module.IMetric, "ValueKind_STRING", object())
            for name in action.metric_names():
                metric = action.metric_by_name(name)
                try:
                    if metric.value_kind() == string_kind:
                        text = metric.as_string()
                    else:
                        text = repr(metric.as_double())
                    metrics[name] = (text, metric.unit() or "")
                except Exception:
                    continue
            block = metrics.get("launch__block_size", ("", ""))[0]
            grid = metrics.get("launch__grid_size", ("", ""))[0]
            launches.append(Launch(str(len(launches)), action.name(), block, grid, metrics))
    return launches


# -- files -----------------------------------------------------------------------------------------


def write(run_dir: Path, summary: NcuSummary) -> None:
    from ktui.protocol.files import write_atomic

    write_atomic(Path(run_dir) / SUMMARY_FILE, json.dumps(summary.to_json(), indent=2))
    write_atomic(Path(run_dir) / TEXT_FILE, summary.text() + "\n")


def load(run_dir: Path) -> NcuSummary | None:
    """The profile stored in ``<run_dir>/ncu.json``; None when there is none (or it is unreadable)."""
    path = Path(run_dir) / SUMMARY_FILE
    try:
        return NcuSummary.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def latest(state_dir: Path, kernel: str) -> NcuSummary | None:
    """The newest profile of any version of ``kernel``."""
    runs = statedir.runs_of(state_dir, kernel)
    if not runs.is_dir():
        return None
    found = [s for s in (load(d) for d in runs.iterdir() if d.is_dir()) if s is not None]
    return max(found, key=lambda s: s.created, default=None)
