"""Hot spots, measured: Nsight Compute's per-instruction page aggregated to the kernel's lines.

``ncu --import R --page source --csv --print-source sass`` exports, per profiled kernel, a
``"Kernel Name",<name>`` line, then a header starting with ``Address`` (``# Address`` in some
versions), then one row per SASS instruction: the instruction text, the warp-state samples that
landed on it (all and not-issued, and per stall reason as ``stall_<reason>`` or
``smsp__pcsamp_warps_issue_stalled_<reason>`` columns), instructions executed, and memory
figures. Columns are read by name: ncu versions add and rename some.

Each row is put on a source line through the static line table of the same CUBIN
(``ktui.measure.hotspots``: ``nvdisasm -g`` of the run folder's dumps), by the instruction's offset
from the kernel's first one; the opcodes of both are compared, so a profile of another build is
told, not misattributed. The lines with most samples are the hot lines, each with its main stall
reasons and a short reading of what they mean.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from pathlib import Path

from ktui.measure import hotspots, sass
from ktui.profiling.ncu.parse import number

MEASURED_FILE = hotspots.MEASURED_FILE
SOURCE_CSV = "ncu_source.csv"
TOP_LINES = 8
# The figures a row may carry, by the column names ncu has used for them.
_SAMPLES = ("Warp Stall Sampling (All Samples)", "Warp Stall Sampling (All Cycles)", "# Samples", "Sampling Data (All)")
_NOT_ISSUED = ("Warp Stall Sampling (Not-issued Samples)", "Warp Stall Sampling (No Instructions Issued)",
               "Sampling Data (Not Issued)")
_EXECUTED = ("Instructions Executed", "Warp Instructions Executed")
_THREADS = ("Thread Instructions Executed",)
_STALL = re.compile(r"^(?:stall_|smsp__pcsamp_warps_issue_stalled_)([a-z_]+?)$")

# What a stall reason means for the line it sits on, in a few words: the metric names and the short
# names of the source page's ``stall_*`` columns (``mio``, ``lg``, ``imc``, ``tex``, ``sleep``…).
READINGS = {
    "long_scoreboard": "waiting on global memory",
    "long_sb": "waiting on global memory",
    "lg_throttle": "global memory queue full: many small loads/stores",
    "lg": "global memory queue full: many small loads/stores",
    "short_scoreboard": "waiting on shared memory or special math (MUFU)",
    "short_sb": "waiting on shared memory or special math (MUFU)",
    "mio_throttle": "shared-memory / special-math queue full",
    "mio": "shared-memory / special-math queue full",
    "tex_throttle": "texture/L1 queue full",
    "tex": "texture/L1 queue full",
    "math_pipe_throttle": "math pipe busy",
    "math": "math pipe busy",
    "mma": "tensor cores busy",
    "gmma": "tensor cores busy (warpgroup MMA)",
    "wait": "fixed-latency dependency between instructions",
    "barrier": "waiting at a barrier for the other warps",
    "membar": "waiting on a memory fence",
    "branch_resolving": "branch divergence / resolving a branch",
    "branch": "branch divergence / resolving a branch",
    "no_instruction": "instruction cache miss",
    "no_inst": "instruction cache miss",
    "dispatch_stall": "dispatch stall",
    "dispatch": "dispatch stall",
    "drain": "draining stores at exit",
    "sleeping": "sleeping (warps parked)",
    "sleep": "sleeping (warps parked)",
    "imc_miss": "constant cache miss",
    "imc": "constant cache miss",
    "misc": "miscellaneous stall",
    "selected": "issuing: the line is busy, not stalled",
    "not_selected": "ready but another warp issued",
}
NOT_A_STALL = {"selected", "not_selected"}


class SourcePageError(ValueError):
    """The text holds no ncu source page."""


def parse_source_page(text: str) -> dict[str, list[dict[str, str]]]:
    """``--page source --csv`` text → {kernel name: its rows keyed by header}."""
    kernels: dict[str, list[dict[str, str]]] = {}
    name, header = "", None
    for row in csv.reader(io.StringIO("\n".join(x for x in text.splitlines() if not x.startswith("==")))):
        if not row or not any(c.strip() for c in row):
            continue
        first = row[0].strip()
        if first == "Kernel Name":
            name, header = (row[1].strip() if len(row) > 1 else ""), None
            kernels.setdefault(name, [])
        elif first in ("Address", "# Address"):
            header = [h.strip() for h in row]
            kernels.setdefault(name, [])
        elif header is not None and len(row) == len(header):
            kernels[name].append(dict(zip(header, row)))
    if not any(kernels.values()):
        raise SourcePageError("no per-instruction rows found (expected a header line starting with \"Address\")")
    return kernels


def _first(row: dict[str, str], names: tuple[str, ...]) -> float | None:
    for n in names:
        if n in row:
            return number(row[n])
    return None


def _address(text: str) -> int | None:
    try:
        return int(text.strip(), 16)
    except ValueError:
        return None


def _opcode(source: str) -> str:
    s = re.sub(r"^\s*@!?U?P\w+\s+", "", source.strip())
    return s.split(None, 1)[0].rstrip(";") if s else ""


def instruction_rows(rows: list[dict[str, str]]) -> list[dict]:
    """Each SASS row as {offset, opcode, samples, not_issued, executed, threads, stalls, memory}; the
    offset counts from the kernel's first instruction, whatever base ncu printed."""
    parsed = []
    for row in rows:
        addr = _address(row.get("Address", row.get("# Address", "")))
        opcode = _opcode(row.get("Source", ""))
        if addr is None or not opcode:
            continue
        stalls = {}
        for col, value in row.items():
            m = _STALL.match(col)
            if m and not col.endswith("_not_issued"):
                v = number(value)
                if v:
                    stalls[m.group(1)] = stalls.get(m.group(1), 0) + v
        memory = {col: number(v) for col, v in row.items()
                  if any(w in col for w in ("Sectors", "Requests", "Bytes")) and number(v)}
        samples = _first(row, _SAMPLES)
        parsed.append({"address": addr, "opcode": opcode,
                       "samples": samples if samples is not None else sum(stalls.values()),
                       "not_issued": _first(row, _NOT_ISSUED) or 0, "executed": _first(row, _EXECUTED) or 0,
                       "threads": _first(row, _THREADS) or 0, "stalls": stalls, "memory": memory})
    if parsed:
        base = min(r["address"] for r in parsed)
        for r in parsed:
            r["offset"] = r.pop("address") - base
    return parsed


def _static_function(listing_functions: dict[str, list], kernel: str) -> str | None:
    """The function of the listing ncu's kernel name stands for (ncu may print it demangled, with arguments)."""
    if kernel in listing_functions:
        return kernel
    bare = kernel.split("(", 1)[0].strip().rsplit(" ", 1)[-1]
    for fn in listing_functions:
        if fn == bare or fn in kernel or bare in fn:
            return fn
    return next(iter(listing_functions)) if len(listing_functions) == 1 else None


def static_tables(run_dir: Path) -> dict[str, dict[int, tuple[str, int, str]]]:
    """The line table of every CUBIN the dumps rung left in ``run_dir`` (with its PTX's corrections)."""
    tables: dict = {}
    for cubin in sorted(Path(run_dir).glob("*.cubin")):
        ptx = cubin.with_suffix(".ptx")
        tables.update(hotspots.attribute_offsets(sass.disassemble(cubin, line_info=True),
                                                 ptx.read_text(errors="replace") if ptx.exists() else ""))
    return tables


def aggregate_run(page: dict[str, list[dict[str, str]]], run_dir: Path, source_name: str) -> dict:
    """``aggregate`` with the run folder's CUBINs and ``source.py``: the build that was profiled."""
    source = Path(run_dir) / "source.py"
    text = source.read_text(errors="replace") if source.exists() else ""
    try:
        static = static_tables(run_dir)
    except (sass.ToolMissing, RuntimeError, OSError) as exc:
        static = {}
        note = f"no line table: {exc}"
    else:
        note = ""
    data = aggregate(page, static, source_name, text)
    if note:
        data["notes"].insert(0, note)
    return data


def aggregate(page: dict[str, list[dict[str, str]]], static: dict[str, dict[int, tuple[str, int, str]]],
              source_name: str, source_text: str, top: int = TOP_LINES) -> dict:
    """The measured figures per kernel line: samples, stall reasons, instructions executed, memory;
    the ``top`` hot lines first, each with its reading; other files grouped as in the static table
    (``hotspots.attribute_offsets``)."""
    src = source_text.splitlines()
    kernels, notes = [], []
    for kernel, rows in page.items():
        instrs = instruction_rows(rows)
        fn = _static_function(static, kernel)
        table = static.get(fn, {}) if fn else {}
        if not table:
            notes.append(f"{kernel}: no line table for it in the run folder's CUBINs; figures are per kernel only")
        mismatched = sum(1 for r in instrs if r["offset"] in table and table[r["offset"]][2] != r["opcode"])
        if instrs and mismatched > len(instrs) // 10:
            notes.append(f"{kernel}: {mismatched} of {len(instrs)} instructions differ from the run folder's SASS "
                         "(the profile is of another build): not attributed to lines")
            table = {}
        per_line: dict[tuple[str, int], dict] = {}
        total = sum(r["samples"] for r in instrs) or 0
        for r in instrs:
            path, line, _ = table.get(r["offset"], ("", 0, ""))
            own = bool(path) and Path(path).name == source_name and line > 0
            key = (source_name, line) if own else (hotspots.file_group(path), 0)
            acc = per_line.setdefault(key, {"samples": 0.0, "not_issued": 0.0, "executed": 0.0, "threads": 0.0,
                                            "stalls": Counter(), "memory": Counter(), "classes": Counter()})
            for f in ("samples", "not_issued", "executed", "threads"):
                acc[f] += r[f]
            acc["stalls"].update(r["stalls"])
            acc["memory"].update(r["memory"])
            acc["classes"][hotspots.classify(r["opcode"])] += 1
        lines = [_line_entry(k, v, total, src) for k, v in per_line.items()]
        lines.sort(key=lambda x: -x["samples"])
        kernels.append({"kernel": kernel, "function": fn or "", "samples": total,
                        "hot_lines": [x for x in lines if x["line"]][:top],
                        "elsewhere": [x for x in lines if not x["line"]]})
    return {"source": source_name, "kernels": kernels, "notes": notes}


def _line_entry(key: tuple[str, int], acc: dict, total: float, src: list[str]) -> dict:
    file, line = key
    stalls = [(r, n) for r, n in acc["stalls"].most_common() if r not in NOT_A_STALL][:3]
    entry = {
        "file": file, "line": line, "text": src[line - 1].strip() if 0 < line <= len(src) else "",
        "samples": acc["samples"], "share": round(acc["samples"] / total, 4) if total else 0.0,
        "executed": acc["executed"], "stalls": [[r, n] for r, n in stalls],
        "memory": dict(acc["memory"]), "classes": dict(acc["classes"]),
    }
    entry["reading"] = reading(entry, acc["threads"])
    return entry


def reading(entry: dict, threads: float = 0.0) -> str:
    """A few words on why a line is hot: its main stall reason read against what the line compiled to."""
    words = []
    if entry["stalls"]:
        reason = entry["stalls"][0][0]
        if entry["classes"].get("mma") and reason in ("math_pipe_throttle", "math", "wait", "mma", "gmma"):
            words.append("tensor cores busy")
        else:
            words.append(READINGS.get(reason, reason.replace("_", " ")))
    if entry["executed"] and threads and threads / entry["executed"] < 28:
        words.append(f"branch divergence ({threads / entry['executed']:.0f} of 32 threads active)")
    return "; ".join(words) or "no stall samples"


def render_text(data: dict) -> str:
    out = [f"Hot lines of {data['source']} (Nsight Compute warp-state samples per source line)"]
    for k in data["kernels"]:
        out.append(f"{k['kernel']}: {k['samples']:g} samples")
        for x in k["hot_lines"]:
            stalls = ", ".join(f"{r} {n / x['samples']:.0%}" for r, n in x["stalls"]) if x["samples"] else ""
            out.append(f"  {data['source']}:{x['line']:<5} {x['share']:>5.0%}  {x['reading']}"
                       + (f"  [{stalls}]" if stalls else "") + f"\n        {x['text']}")
        for x in k["elsewhere"]:
            out.append(f"  [{x['file']}] {x['share']:.0%}")
    out += [f"note: {n}" for n in data.get("notes", [])]
    return "\n".join(out)
