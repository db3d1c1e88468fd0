"""Hot spots, static: each SASS instruction attributed to the kernel's own source line.

Both DSLs put line information in the CUBIN (Triton's ``.loc`` by default, CuTeDSL with
``GenerateLineInfo``, which ktui turns on), and ``nvdisasm -g`` prints it as ``//## File "…",
line N`` before the instructions it covers. Counting those instructions by class per line says
where the loads, the tensor-core MMAs and the spills of a kernel come from, on a machine without
a GPU. Lines of other files (Triton's library, CuTeDSL's internals) are grouped per file and
named. The paths in the line information are those of the compile, which may be another folder
(Triton's cache), so the kernel's file is recognised by its name.

No torch or triton imports: the worker's dumps rung, the dashboard, the MCP server and
``ktui diff`` all read this.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ktui.measure import sass
from ktui.protocol.dsls import dsls

JSON_FILE = "hotspots.json"
TEXT_FILE = "hotspots.txt"
MEASURED_FILE = "hotspots_measured.json"  # ``ktui profile``'s hot lines (``ktui.profiling.ncu.source``)

# The classes, in the order they are shown; "spill" is local memory (LDL/STL).
CLASSES = ("global_load", "global_store", "shared_load", "shared_store", "mma", "fma", "branch", "spill", "other")
SHORT = {"global_load": "gld", "global_store": "gst", "shared_load": "sld", "shared_store": "sst", "mma": "mma",
         "fma": "fma", "branch": "br", "spill": "spill", "other": "other"}
NO_LINE = "(no line info)"

_BY_BASE = {
    "LDG": "global_load", "LDGSTS": "global_load", "UTMALDG": "global_load", "UBLKCP": "global_load",
    "LDGDEPBAR": "global_load", "UTMAPF": "global_load",
    "STG": "global_store", "RED": "global_store", "ATOMG": "global_store", "UTMASTG": "global_store",
    "UTMAREDG": "global_store",
    "LDS": "shared_load", "LDSM": "shared_load",
    "STS": "shared_store", "STSM": "shared_store", "ATOMS": "shared_store",
    "HMMA": "mma", "HGMMA": "mma", "IMMA": "mma", "QGMMA": "mma", "IGMMA": "mma", "BGMMA": "mma", "DMMA": "mma",
    "UTCHMMA": "mma", "UTCQMMA": "mma", "UTCIMMA": "mma", "UTCMMA": "mma",
    "FFMA": "fma", "FADD": "fma", "FMUL": "fma", "FFMA2": "fma", "FADD2": "fma", "FMUL2": "fma", "HFMA2": "fma",
    "HADD2": "fma", "HMUL2": "fma", "DFMA": "fma", "DADD": "fma", "DMUL": "fma", "FMNMX": "fma",
    "BRA": "branch", "BRX": "branch", "JMP": "branch", "JMX": "branch", "CALL": "branch", "RET": "branch",
    "EXIT": "branch", "BSSY": "branch", "BSYNC": "branch", "BREAK": "branch", "WARPSYNC": "branch",
    "LDL": "spill", "STL": "spill",
}


def classify(opcode: str) -> str:
    """``LDG.E.128`` → ``global_load``; ``HGMMA.64x128x16.F32.BF16`` → ``mma``; unknown → ``other``."""
    return _BY_BASE.get(opcode.split(".")[0], "other")


_FILE_LINE = re.compile(r'^\s*//##\s*File\s+"([^"]*)",\s*line\s+(\d+)')


def attribute_listing(listing: str) -> dict[str, list[tuple[str, int, str]]]:
    """``nvdisasm -c -g`` output → {function: [(file, line, opcode)]}, one entry per instruction
    up to the end of its code (the padding NOPs and the trap loop are left out, as in
    ``sass.instruction_count``)."""
    out: dict[str, list[tuple[str, int, str]]] = {}
    for fn, lines in sass.split_functions(listing).items():
        items: list[tuple[str, int, str]] = []
        for (file, number), line in _placed(lines):
            match = sass._INSTR.match(line)
            if match:
                items.append((file, number, match.group(1)))
        out[fn] = items[: sass.instruction_count(lines)]
    return out


def _placed(lines: list[str]) -> Iterator[tuple[tuple[str, int], str]]:
    """Each line of a function's listing but the line information, with the ``(file, line)`` the
    line information before it names (``("", 0)`` before any)."""
    where = ("", 0)
    for line in lines:
        loc = _FILE_LINE.match(line)
        if loc:
            where = (loc.group(1), int(loc.group(2)))
        else:
            yield where, line


_OFFSET = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/")


def attribute_offsets(listing: str, ptx: str = "") -> dict[str, dict[int, tuple[str, int, str]]]:
    """``nvdisasm -c -g`` output → {function: {instruction offset: (file, line, opcode)}}, the table
    a profile's per-instruction figures are put on lines with (lines corrected as ``attribute`` does)."""
    drift = inline_asm_drift(ptx) if ptx else {}
    out: dict[str, dict[int, tuple[str, int, str]]] = {}
    for fn, lines in sass.split_functions(listing).items():
        table: dict[int, tuple[str, int, str]] = {}
        for where, line in _placed(lines):
            match, offset = sass._INSTR.match(line), _OFFSET.match(line)
            if match and offset:
                op = match.group(1)
                line = drift.get((where[0], where[1], classify(op)), where[1])
                table[int(offset.group(1), 16)] = (where[0], line, op)
        out[fn] = table
    return out


def file_group(path: str) -> str:
    """A name for a file that is not the kernel's: whose library it is, and which file."""
    if not path:
        return NO_LINE
    p = path.replace("\\", "/")
    name = p.rsplit("/", 1)[-1]
    dsl = next((d for d in dsls() if d.is_library(p)), None)
    if dsl is not None:
        return f"{dsl.title} library ({name})"
    if "/ktui/" in p:
        return f"ktui's DSL glue ({name})"
    return name


@dataclass
class LineFigures:
    """The instructions one line (or one other file) compiled to, by class."""

    line: int
    text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict:
        return {"line": self.line, "text": self.text, "total": self.total, "counts": dict(self.counts)}


@dataclass
class FunctionHotspots:
    name: str
    lines: list[LineFigures]  # the kernel's own lines, in source order
    elsewhere: dict[str, dict[str, int]]  # other files' instructions, by group name

    @property
    def total(self) -> int:
        return sum(x.total for x in self.lines) + sum(sum(c.values()) for c in self.elsewhere.values())

    def to_json(self) -> dict:
        return {"name": self.name, "total": self.total, "lines": [x.to_json() for x in self.lines],
                "elsewhere": [{"file": k, "total": sum(v.values()), "counts": v} for k, v in self.elsewhere.items()]}


def _ordered(counter: Counter) -> dict[str, int]:
    return {c: counter[c] for c in CLASSES if counter.get(c)}


_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_PTX_OP = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)")
_PTX_CLASS = (("ld.global", "global_load"), ("cp.async", "global_load"), ("st.global", "global_store"),
              ("red.global", "global_store"), ("atom.global", "global_store"), ("ld.shared", "shared_load"),
              ("st.shared", "shared_store"))


def inline_asm_drift(ptx: str) -> dict[tuple[str, int, str], int]:
    """Where Triton's line information is off, and the line it should say.

    In an inline-asm block of several lines (Triton's masked loads and stores), the ``.loc`` after
    the block's first counts on one line per asm line (``.loc 1 20 9``, ``1 21 9``, ``1 22 9``…),
    so the load at the block's end is put lines below the ``tl.load`` it comes from. Returns
    {(file, drifted line, class): the block's own line} for the memory instructions of such blocks,
    only where no instruction of that class is really on the drifted line (so a remap is exact).
    """
    files: dict[str, str] = dict(m.groups() for m in map(_PTX_FILE.match, ptx.splitlines()) if m)
    drifted: dict[tuple[str, int, str], set[int]] = {}
    genuine: set[tuple[str, int, str]] = set()
    first = current = None
    in_asm = False
    for line in ptx.splitlines():
        text = line.strip()
        if text.startswith("// begin inline asm"):
            in_asm, first = True, None
            continue
        if text.startswith("// end inline asm"):
            in_asm = False
            continue
        loc = _PTX_LOC.match(line)
        if loc:
            current = (loc.group(1), int(loc.group(2)))
            if in_asm and first is None:
                first = current
            continue
        op = _PTX_OP.match(line)
        if not op or text.startswith(("//", ".")) or current is None:
            continue
        cls = next((c for prefix, c in _PTX_CLASS if op.group(1).startswith(prefix)), None)
        if cls is None:
            continue
        key = (files.get(current[0], ""), current[1], cls)
        if in_asm and first is not None and first[0] == current[0] and current[1] > first[1]:
            drifted.setdefault(key, set()).add(first[1])
        else:
            genuine.add(key)
    return {k: next(iter(v)) for k, v in drifted.items() if k not in genuine and len(v) == 1}


def attribute(listing: str, source_name: str, source_text: str, ptx: str = "") -> list[FunctionHotspots]:
    """Per function of ``listing``: the kernel's lines (file named ``source_name``) and the rest grouped;
    ``ptx`` (the same build's) corrects the lines Triton's inline asm shifts (``inline_asm_drift``)."""
    src = source_text.splitlines()
    drift = inline_asm_drift(ptx) if ptx else {}
    result = []
    for fn, items in attribute_listing(listing).items():
        own: dict[int, Counter] = {}
        other: dict[str, Counter] = {}
        for path, line, opcode in items:
            cls = classify(opcode)
            line = drift.get((path, line, cls), line)
            if path and Path(path).name == source_name and line:
                own.setdefault(line, Counter())[cls] += 1
            else:
                other.setdefault(file_group(path), Counter())[cls] += 1
        lines = [LineFigures(n, src[n - 1].strip() if 0 < n <= len(src) else "", _ordered(c))
                 for n, c in sorted(own.items())]
        ranked = dict(sorted(((k, _ordered(c)) for k, c in other.items()), key=lambda kv: -sum(kv[1].values())))
        result.append(FunctionHotspots(fn, lines, ranked))
    return result


def build(cubin: Path, source_name: str, source_text: str, listing: str | None = None) -> list[FunctionHotspots]:
    """Attribute ``cubin``'s SASS with its line information (``listing``, its ``nvdisasm -c -g``, when
    the caller has it already), with the PTX beside it, if any."""
    ptx = cubin.with_suffix(".ptx")
    return attribute(sass.disassemble(cubin, line_info=True) if listing is None else listing, source_name,
                     source_text, ptx.read_text(encoding="utf-8", errors="replace") if ptx.exists() else "")


def to_json(functions: list[FunctionHotspots], source_name: str) -> dict:
    return {"source": source_name, "classes": list(CLASSES), "functions": [f.to_json() for f in functions]}


def render_text(data: dict, top: int | None = None) -> str:
    """The kernel's lines with a gutter of counts (``top``: only the lines with most instructions)."""
    out = [f"SASS instructions per line of {data['source']} (static: each instruction once, loops not unrolled "
           f"by execution; gld/gst global, sld/sst shared, mma tensor core, fma float math, br branches, "
           f"spill local memory)"]
    head = "  line " + "".join(f"{SHORT[c]:>6}" for c in CLASSES) + " total  source"
    for fn in data["functions"]:
        out += ["", f"{fn['name']}: {fn['total']} instructions", head]
        lines = fn["lines"]
        if top is not None:
            keep = {id(x) for x in sorted(lines, key=lambda x: -x["total"])[:top]}
            lines = [x for x in lines if id(x) in keep]
        for x in lines:
            out.append(f"{x['line']:>6} " + "".join(f"{_cell(x['counts'].get(c)):>6}" for c in CLASSES)
                       + f"{x['total']:>6}  {x['text']}")
        for other in fn["elsewhere"]:
            out.append(f"{'':>6} " + "".join(f"{_cell(other['counts'].get(c)):>6}" for c in CLASSES)
                       + f"{other['total']:>6}  [{other['file']}]")
    return "\n".join(out)


def _cell(n: int | None) -> str:
    return str(n) if n else "·"


def write(run_dir: Path, data: dict) -> tuple[Path, Path]:
    json_path, text_path = Path(run_dir) / JSON_FILE, Path(run_dir) / TEXT_FILE
    json_path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    text_path.write_text(render_text(data) + "\n", encoding="utf-8")
    return json_path, text_path


def load(run_dir: Path) -> dict | None:
    """The static hot spots of a run folder, from ``hotspots.json``, else rebuilt from its CUBINs and
    ``source.py`` (runs made before the file existed); None when neither is there."""
    run_dir = Path(run_dir)
    try:
        return json.loads((run_dir / JSON_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    source = run_dir / "source.py"
    cubins = sorted(run_dir.glob("*.cubin"))
    if not cubins or not source.exists():
        return None
    name = _source_name(run_dir)
    text = source.read_text(encoding="utf-8", errors="replace")
    try:
        functions = [f for c in cubins for f in build(c, name, text)]
    except (sass.ToolMissing, RuntimeError, OSError):
        return None
    return to_json(functions, name)


def _source_name(run_dir: Path) -> str:
    """The kernel file's name, as the line information spells it: from report.json, else the kernel id."""
    try:
        report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
        path = report.get("kernel_path") or report.get("path") or ""
        if path:
            return Path(path).name
    except (OSError, ValueError, AttributeError):
        pass
    return f"{run_dir.parent.name}.py"


def line_totals(data: dict) -> dict[int, dict]:
    """Every function's figures of the kernel's lines, summed per line: {line: {"text", "total", "counts"}}."""
    merged: dict[int, dict] = {}
    for fn in data.get("functions", []):
        for x in fn["lines"]:
            m = merged.setdefault(x["line"], {"text": x["text"], "total": 0, "counts": {}})
            m["total"] += x["total"]
            for c, n in x["counts"].items():
                m["counts"][c] = m["counts"].get(c, 0) + n
    return dict(sorted(merged.items()))
