"""Launches folded into one ``KernelProfile`` per kernel: the figures that explain its time (duration,
throughputs, occupancy, registers, shared memory, warp stalls, ncu's rule findings)."""

from __future__ import annotations

import re
from typing import Iterable

from ktui.profiling.ncu.parse import Launch, number, to_bytes, to_us
from ktui.profiling.ncu.summary import KernelProfile, first_sentence

TOP_STALLS = 4
TOP_FINDINGS = 4

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
