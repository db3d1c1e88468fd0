"""The facts above a diff: instruction and opcode counts, their deltas, and how they read as text."""

from __future__ import annotations

import re
from collections import Counter

from ktui.history.sassdiff.model import FunctionDiff

_PREDICATE = re.compile(r"^@!?U?P\w+\s+")


def opcode_of(line: str) -> str | None:
    """``@!P0 LDG.E.128 R0, …`` → ``LDG.E.128``; labels → None."""
    if line.endswith(":"):
        return None
    body = _PREDICATE.sub("", line)
    word = body.split(" ", 1)[0]
    return word or None


def count_opcodes(lines: list[str]) -> Counter:
    return Counter(op for op in map(opcode_of, lines) if op)


def count_deltas(base: Counter, new: Counter) -> list[tuple[str, int, int]]:
    """(name, base, new) for each count that changed, the largest change first."""
    changed = [(op, base.get(op, 0), new.get(op, 0)) for op in set(base) | set(new) if base.get(op, 0) != new.get(op, 0)]
    return sorted(changed, key=lambda d: (-abs(d[2] - d[1]), d[0]))


def family_counts(counts: Counter) -> Counter:
    """Opcode counts summed by family, the opcode's first word (``LDG.E.128`` → ``LDG``)."""
    fam: Counter = Counter()
    for op, n in counts.items():
        fam[op.split(".", 1)[0]] += n
    return fam


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
    head += f"  · instructions {_delta_text(*f.instructions)} (the NOP padding after the code not counted)"
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
