"""ncu's exports read into one ``Launch`` per profiled kernel launch: the raw and details CSV pages
(by column name, never by position) and NVIDIA's ``ncu_report`` module; units converted here."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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
