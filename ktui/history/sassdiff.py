"""What changed in the machine code between two versions of a kernel.

A raw diff of two nvdisasm listings is noise: every address moves, every register gets a new
number, every branch label is renumbered across the whole file. So each function's listing is
normalised first — addresses, encodings, comments, ``.reuse`` flags and the padding after the
last ``EXIT`` dropped; registers (R, UR, P, UP) and labels renumbered by first use — and only
then diffed. Above the diff come the facts a kernel developer looks for: per-opcode count deltas
(``LDG.E.128 +8``, ``HGMMA… +32``) and resource deltas from each version's ``resources.json``.

Works from the files ``ktui run`` leaves in ``.ktui/runs/<kernel>/<version>/``, so it needs no GPU
(the CPU tier compiles ahead of time). No torch or triton imports: the dashboard uses it too.
"""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktui.history.best import best_version
from ktui.measure.sass import split_functions
from ktui.protocol import statedir

if TYPE_CHECKING:
    from ktui.history.store import Store

RESOURCE_KEYS = ("registers", "spill_instructions", "shared", "local", "stack")
BASES = ("previous", "best", "pinned")


class DiffError(Exception):
    """A diff cannot be made; the message says why and what to do."""


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


@dataclass
class SassDiff:
    kernel: str
    base_version: int
    new_version: int
    functions: list[FunctionDiff]

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "base_version": self.base_version,
            "new_version": self.new_version,
            "identical": all(f.status == "same" for f in self.functions),
            "functions": [_plain(dataclasses.asdict(f)) for f in self.functions],
        }

    def text(self, unified: bool = True) -> str:
        """The human report: facts per function first, then the unified diffs."""
        lines = [f"{self.kernel}: SASS v{self.base_version} → v{self.new_version}"]
        if not self.functions:
            lines.append("  (no GPU functions in either version)")
        for f in self.functions:
            lines.extend(function_facts(f))
        if unified:
            for f in self.functions:
                if f.unified:
                    lines.append("")
                    lines.extend(f.unified)
        return "\n".join(lines)


def _plain(obj: Any) -> Any:
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


# -- normalisation ---------------------------------------------------------------------------------

_ADDRESS = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s*")
_ENCODING = re.compile(r"/\*\s*0x[0-9a-fA-F]+\s*\*/")
_COMMENT = re.compile(r"//.*$")
_REGISTER = re.compile(r"\b(UR|UP|R|P)(\d+)\b")
_REGISTER_NUMBER = re.compile(r"(?:(?<=\b[RP])|(?<=\bU[RP]))\d+\b")  # the digits of a register name
_LABEL_DEF = re.compile(r"^(\.L\w+):$")
_LABEL_REF = re.compile(r"\.L_\w+")
_SYMBOL_DEF = re.compile(r"^[$.\w]+:$")
_PREDICATE = re.compile(r"^@!?U?P\w+\s+")


def normalise(lines: list[str], function: str = "") -> list[str]:
    """One function's nvdisasm lines → comparable lines (see the module docstring)."""
    out: list[str] = []
    registers: dict[str, str] = {}
    per_kind = {"R": 0, "UR": 0, "P": 0, "UP": 0}
    labels: dict[str, str] = {}

    def reg(match: re.Match) -> str:
        key = match.group(0)
        name = registers.get(key)
        if name is None:
            kind = match.group(1)
            name = registers[key] = f"{kind}{per_kind[kind]}"
            per_kind[kind] += 1
        return name

    def label(match: re.Match) -> str:
        return labels.setdefault(match.group(0), f".L{len(labels)}")

    for raw in lines:
        line = _ENCODING.sub("", raw) if "/* 0x" in raw or "/*0x" in raw else raw
        address = _ADDRESS.match(line)
        if address:
            line = line[address.end():]
        if "//" in line:
            line = _COMMENT.sub("", line)
        line = line.strip()
        if not line:
            continue
        if address is None:
            match = _LABEL_DEF.match(line)
            if match:
                out.append(_LABEL_REF.sub(label, line))
            elif _SYMBOL_DEF.match(line) and line[:-1] not in (function, f".text.{function}"):
                out.append(line)  # a named subroutine inside the function: keep it as a label
            continue  # directives (.align, .size…), the function's own symbol
        if line.endswith(";"):
            line = line[:-1].rstrip()
        if ".reuse" in line:
            line = line.replace(".reuse", "")
        if ".L" in line:
            line = _LABEL_REF.sub(label, line)
        line = _REGISTER.sub(reg, line)
        out.append(" ".join(line.split()) if "  " in line else line)
    return _strip_padding(out)


def shape_key(line: str) -> str:
    """A normalised line with register numbers removed: what the diff aligns on, so a version
    whose register allocation shifted (one more register early on renumbers every later one)
    still lines up instruction by instruction."""
    return _REGISTER_NUMBER.sub("", line)


def _strip_padding(lines: list[str]) -> list[str]:
    """Drop what follows the code: the NOP padding, the ``.L: BRA .L`` trap loop, the end label."""
    end = len(lines)

    def is_label(s: str) -> bool:
        return s.endswith(":")

    while end and (lines[end - 1] == "NOP" or is_label(lines[end - 1])):
        end -= 1
    if end >= 2 and is_label(lines[end - 2]) and lines[end - 1] in (f"BRA `({lines[end - 2][:-1]})", f"BRA ({lines[end - 2][:-1]})"):
        end -= 2
        while end and (lines[end - 1] == "NOP" or is_label(lines[end - 1])):
            end -= 1
    return lines[:end]


def opcode_of(line: str) -> str | None:
    """``@!P0 LDG.E.128 R0, …`` → ``LDG.E.128``; labels → None."""
    if line.endswith(":"):
        return None
    body = _PREDICATE.sub("", line)
    word = body.split(" ", 1)[0]
    return word or None


def count_opcodes(lines: list[str]) -> Counter:
    return Counter(op for op in map(opcode_of, lines) if op)


def _deltas(base: Counter, new: Counter) -> list[tuple[str, int, int]]:
    changed = [(op, base.get(op, 0), new.get(op, 0)) for op in set(base) | set(new) if base.get(op, 0) != new.get(op, 0)]
    return sorted(changed, key=lambda d: (-abs(d[2] - d[1]), d[0]))


def _families(counts: Counter) -> Counter:
    fam: Counter = Counter()
    for op, n in counts.items():
        fam[op.split(".", 1)[0]] += n
    return fam


# -- one version on disk ---------------------------------------------------------------------------


@dataclass
class _Listing:
    lines: list[str]  # normalised
    resources: dict[str, Any]


def load_version(state_dir: Path, kernel: str, version: int) -> dict[str, _Listing]:
    """``{function: listing}`` for one stored version, from its ``*.sass`` and ``resources.json``."""
    run_dir = statedir.run_dir(state_dir, kernel, version)
    sass_files = sorted(run_dir.glob("*.sass")) if run_dir.is_dir() else []
    if not sass_files:
        raise MissingSass(
            f"{kernel} v{version} has no SASS in {run_dir}: its last run stopped before the dumps rung "
            f"(see `ktui history`), or it was never run"
        )
    try:
        resources = json.loads((run_dir / "resources.json").read_text())
    except (OSError, ValueError):
        resources = {}
    functions: dict[str, _Listing] = {}
    for path in sass_files:
        for name, lines in split_functions(path.read_text(encoding="utf-8", errors="replace")).items():
            functions[name] = _Listing(normalise(lines, name), resources.get(name, {}))
    return functions


# -- the diff --------------------------------------------------------------------------------------


def diff_versions(state_dir: Path, kernel: str, base_version: int, new_version: int, context: int = 3) -> SassDiff:
    base = load_version(state_dir, kernel, base_version)
    new = load_version(state_dir, kernel, new_version)
    return diff_listings(kernel, base_version, new_version, base, new, context)


def diff_listings(kernel: str, base_version: int, new_version: int, base: dict[str, _Listing],
                  new: dict[str, _Listing], context: int = 3) -> SassDiff:
    pairs = _pair_functions(base, new)
    functions = [
        _diff_function(name, base_name, base.get(base_name), new.get(name), base_version, new_version, context)
        for name, base_name in pairs
    ]
    order = {"changed": 0, "added": 1, "removed": 2, "same": 3}
    functions.sort(key=lambda f: (order[f.status], f.name))
    return SassDiff(kernel, base_version, new_version, functions)


def _pair_functions(base: dict[str, _Listing], new: dict[str, _Listing]) -> list[tuple[str, str]]:
    """(new name, base name) pairs: same symbol first; then a lone leftover pair from the same
    Python function (CuTeDSL mangles argument types into the symbol, so it can change)."""
    pairs = [(n, n) for n in new if n in base]
    only_new = [n for n in new if n not in base]
    only_base = [b for b in base if b not in new]

    def source(listing: _Listing) -> str:
        return str(listing.resources.get("source_fn") or listing.resources.get("file_stem") or "")

    for n in list(only_new):
        matches = [b for b in only_base if source(base[b]) and source(base[b]) == source(new[n])]
        news = [m for m in only_new if source(new[m]) == source(new[n])]
        if len(matches) == 1 and len(news) == 1:
            pairs.append((n, matches[0]))
            only_new.remove(n)
            only_base.remove(matches[0])
    pairs += [(n, "") for n in only_new]
    pairs += [(b, b) for b in only_base]
    return pairs


def _diff_function(name: str, base_name: str, base: _Listing | None, new: _Listing | None,
                   base_version: int, new_version: int, context: int) -> FunctionDiff:
    base_lines = base.lines if base else []
    new_lines = new.lines if new else []
    base_counts, new_counts = count_opcodes(base_lines), count_opcodes(new_lines)
    base_keys, new_keys = [shape_key(x) for x in base_lines], [shape_key(x) for x in new_lines]
    if base is None:
        status = "added"
    elif new is None:
        status = "removed"
    else:
        status = "same" if base_keys == new_keys else "changed"
    unified = []
    if status != "same":
        unified = unified_diff(base_lines, new_lines, f"v{base_version}/{base_name or name}", f"v{new_version}/{name}",
                               context, keys=(base_keys, new_keys))
    resources = {
        key: ((base.resources.get(key) if base else None), (new.resources.get(key) if new else None))
        for key in RESOURCE_KEYS
    }
    families = _deltas(_families(base_counts), _families(new_counts))
    return FunctionDiff(
        name=name,
        status=status,
        instructions=(sum(base_counts.values()), sum(new_counts.values())),
        opcode_deltas=_deltas(base_counts, new_counts),
        resources=resources,
        unified=unified,
        family_deltas=families,
        base_name=base_name if base_name and base_name != name else "",
    )


def unified_diff(base: list[str], new: list[str], from_name: str, to_name: str, context: int = 3,
                 keys: tuple[list[str], list[str]] | None = None) -> list[str]:
    """A unified diff aligned on ``shape_key``: lines that differ only in register numbers count as
    equal (shown as the new version has them); '-'/'+' lines are real instruction changes."""
    base_keys, new_keys = keys or ([shape_key(x) for x in base], [shape_key(x) for x in new])
    ops = _opcodes(matching_pairs(base_keys, new_keys), len(base), len(new))
    out: list[str] = []
    for group in _grouped(ops, context):
        if not out:
            out += [f"--- {from_name}", f"+++ {to_name}"]
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out.extend(" " + line for line in new[b1:b2])
                continue
            out.extend("-" + line for line in base[a1:a2])
            out.extend("+" + line for line in new[b1:b2])
    return out


# Alignment. difflib's matcher is either fast and poor on listings full of repeated lines (its
# "autojunk" drops frequent lines: most of a SASS listing) or slow (quadratic on them). So align
# like a patience diff: lines whose key occurs equally often on both sides in a region are paired in
# order, the longest chain of pairs increasing on both sides anchors the region, and the gaps
# between anchors are solved the same way; difflib only finishes gaps with no such line.

_SMALL_GAP = 250_000  # a gap up to this many line pairs gets difflib's exact (non-junking) matcher


def matching_pairs(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """(i, j) with a[i] == b[j], increasing in both i and j."""
    result: list[tuple[int, int]] = []
    tasks: list[tuple] = [("region", 0, len(a), 0, len(b))]
    while tasks:
        task = tasks.pop()
        if task[0] == "pairs":
            result.extend(task[1])
            continue
        _, alo, ahi, blo, bhi = task
        prefix = []
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            prefix.append((alo, blo))
            alo, blo = alo + 1, blo + 1
        suffix = []
        while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
            ahi, bhi = ahi - 1, bhi - 1
            suffix.append((ahi, bhi))
        tasks.append(("pairs", suffix[::-1]))  # tasks pop last-in first: push in reverse order
        if alo < ahi and blo < bhi:
            anchors = _anchors(a, b, alo, ahi, blo, bhi)
            if anchors:
                bounds = [(alo - 1, blo - 1), *anchors, (ahi, bhi)]
                for (i0, j0), (i1, j1) in reversed(list(zip(bounds, bounds[1:]))):
                    if i1 < ahi:
                        tasks.append(("pairs", [(i1, j1)]))
                    tasks.append(("region", i0 + 1, i1, j0 + 1, j1))
            else:
                matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi],
                                                  autojunk=(ahi - alo) * (bhi - blo) > _SMALL_GAP)
                tasks.append(("pairs", [(alo + m.a + k, blo + m.b + k)
                                        for m in matcher.get_matching_blocks() for k in range(m.size)]))
        tasks.append(("pairs", prefix))
    return result


def _anchors(a: list[str], b: list[str], alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int]]:
    pos_a: dict[str, list[int]] = {}
    pos_b: dict[str, list[int]] = {}
    for i in range(alo, ahi):
        pos_a.setdefault(a[i], []).append(i)
    for j in range(blo, bhi):
        pos_b.setdefault(b[j], []).append(j)
    pairs = []
    for key, ia in pos_a.items():
        jb = pos_b.get(key)
        if jb is not None and len(jb) == len(ia):
            pairs.extend(zip(ia, jb))
    pairs.sort()
    return _longest_chain(pairs)


def _longest_chain(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of ``pairs`` (sorted by i, distinct i) increasing in j."""
    tails: list[int] = []  # smallest last j of a chain of each length
    tail_at: list[int] = []
    prev: list[int | None] = [None] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tail_at.append(k)
        else:
            tails[pos] = j
            tail_at[pos] = k
        prev[k] = tail_at[pos - 1] if pos else None
    chain = []
    k = tail_at[-1] if tail_at else None
    while k is not None:
        chain.append(pairs[k])
        k = prev[k]
    return chain[::-1]


def _opcodes(pairs: list[tuple[int, int]], na: int, nb: int) -> list[tuple[str, int, int, int, int]]:
    """Matched pairs → ("equal" | "change", i1, i2, j1, j2) runs covering both sequences."""
    ops: list[tuple[str, int, int, int, int]] = []
    i = j = 0
    for pi, pj in [*pairs, (na, nb)]:
        if i < pi or j < pj:
            ops.append(("change", i, pi, j, pj))
        if pi < na:
            if ops and ops[-1][0] == "equal" and ops[-1][2] == pi and ops[-1][4] == pj:
                ops[-1] = ("equal", ops[-1][1], pi + 1, ops[-1][3], pj + 1)
            else:
                ops.append(("equal", pi, pi + 1, pj, pj + 1))
        i, j = pi + 1, pj + 1
    return ops


def _grouped(ops: list[tuple[str, int, int, int, int]], n: int):
    """Hunks: the changes with ``n`` lines of context, merged when their context would touch."""
    if not any(tag != "equal" for tag, *_ in ops):
        return
    ops = list(ops)
    if ops[0][0] == "equal":
        _, i1, i2, j1, j2 = ops[0]
        ops[0] = ("equal", max(i1, i2 - n), i2, max(j1, j2 - n), j2)
    if ops[-1][0] == "equal":
        _, i1, i2, j1, j2 = ops[-1]
        ops[-1] = ("equal", i1, min(i2, i1 + n), j1, min(j2, j1 + n))
    group: list[tuple[str, int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal" and i2 - i1 > 2 * n:
            group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def _range(start: int, stop: int) -> str:
    """Unified-diff ranges as difflib writes them (1-based start, length; empty ranges start before)."""
    length = stop - start
    first = start + 1
    if length == 1:
        return str(first)
    if not length:
        first -= 1
    return f"{first},{length}"


# -- text ------------------------------------------------------------------------------------------

_RESOURCE_LABELS = {
    "registers": ("registers", ""),
    "spill_instructions": ("spill instr", ""),
    "shared": ("shared", " B"),
    "local": ("local", " B"),
    "stack": ("stack", " B"),
}


def _delta_text(a: int | None, b: int | None, unit: str = "") -> str:
    if a is None and b is None:
        return "?"
    if a is None or b is None:
        return f"{'?' if a is None else a}{unit} → {'?' if b is None else b}{unit}"
    if a == b:
        return f"{a}{unit}"
    return f"{a} → {b}{unit} ({b - a:+d})"


def function_facts(f: FunctionDiff, max_opcodes: int = 12) -> list[str]:
    """The lines above the diff for one function: status, counts, resources, opcode deltas."""
    head = f"{f.name}  {f.status}"
    if f.base_name:
        head += f" (was {f.base_name})"
    head += f"  · instructions {_delta_text(*f.instructions)}"
    lines = [head]
    res = [f"{label} {_delta_text(*f.resources[key], unit)}" for key, (label, unit) in _RESOURCE_LABELS.items()
           if any(v is not None for v in f.resources.get(key, (None, None)))]
    if res:
        lines.append("  " + " · ".join(res))
    if f.opcode_deltas:
        shown = [f"{op} {n - b:+d}" for op, b, n in f.opcode_deltas[:max_opcodes]]
        more = len(f.opcode_deltas) - max_opcodes
        lines.append("  opcodes: " + ", ".join(shown) + (f", … {more} more" if more > 0 else ""))
        # A family line only where it says something the opcode line does not: several variants.
        variants = Counter(op.split(".", 1)[0] for op, _, _ in f.opcode_deltas)
        fam = [f"{name} {n - b:+d}" for name, b, n in f.family_deltas if variants.get(name, 0) > 1]
        if fam:
            lines.append("  families: " + ", ".join(fam))
    return lines


# -- which version to compare with -----------------------------------------------------------------


def resolve_base(store: Store, kernel: str, new_version: int, base: str) -> int:
    """The version to diff ``new_version`` against; raises ``NoBase`` with the reason when none fits."""
    versions = [v for v, _ in store.iter_versions(kernel)]
    if not versions:
        raise NoBase(f"{kernel} has no stored versions yet: run `ktui run` on it first")
    base = (base or "previous").strip()
    if base.isdigit():
        number = int(base)
        if number not in versions:
            raise NoBase(f"{kernel} has no version {number} (it has v{min(versions)}–v{max(versions)})")
        return number
    if base not in BASES:
        raise NoBase(f"unknown base {base!r}: expected previous, best, pinned or a version number")
    if base == "pinned":
        pinned = store.pinned(kernel)
        if pinned is None:
            raise NoBase(f"no baseline is pinned for {kernel}: pin one with `ktui pin PATH VERSION` (or `b` in the dashboard)")
        return pinned

    runs = store.runs(kernel)  # newest first
    last_verdict: dict[int, str] = {}
    for run in runs:
        # A cancelled or interrupted re-run says nothing of the version.
        if run.verdict not in ("cancelled", "interrupted", "running"):
            last_verdict.setdefault(run.version, run.verdict)
    if base == "previous":
        earlier = [v for v in versions if v < new_version]
        passing = [v for v in earlier if last_verdict.get(v) == "passed"]
        if passing:
            return max(passing)
        if not earlier:
            raise NoBase(f"v{new_version} is the first version of {kernel}: there is nothing earlier to compare with")
        raise NoBase(f"none of the {len(earlier)} earlier version(s) of {kernel} passed its last run: "
                     "choose one with --base VERSION")
    newest = {}  # the newest finished run of each version: what "best" counts
    for run in runs:
        if run.verdict not in ("cancelled", "interrupted", "running"):
            newest.setdefault(run.version, run)
    points = [_Point(v, r.verdict, r.summary.get("speedup") if isinstance(r.summary, dict) else None)
              for v, r in newest.items()]
    best = best_version(points, exclude=new_version)
    if best is None:
        raise NoBase(f"no other version of {kernel} passed with a measured speedup (benchmarks run only on a GPU): "
                     "use --base previous or a version number")
    return best.version


@dataclass(frozen=True)
class _Point:
    version: int
    verdict: str
    speedup: float | None
