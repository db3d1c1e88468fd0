"""The diff of two versions: functions paired across versions, each one's facts and unified diff."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktui.history.sassdiff.align import unified_diff
from ktui.history.sassdiff.facts import count_deltas, count_opcodes, family_counts, function_facts
from ktui.history.sassdiff.listing import _Listing, load_version
from ktui.history.sassdiff.model import RESOURCE_KEYS, FunctionDiff
from ktui.history.sassdiff.normalisation import shape_key


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


def _instructions(listing: _Listing | None, counts) -> int:
    """The compile pane's count (``measure.sass.instruction_count``); a listing built from
    normalised lines alone (no raw listing) counts those, which drop the same padding."""
    if listing is not None and listing.instructions is not None:
        return listing.instructions
    return sum(counts.values())


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
    families = count_deltas(family_counts(base_counts), family_counts(new_counts))
    return FunctionDiff(
        name=name,
        status=status,
        instructions=(_instructions(base, base_counts), _instructions(new, new_counts)),
        opcode_deltas=count_deltas(base_counts, new_counts),
        resources=resources,
        unified=unified,
        family_deltas=families,
        base_name=base_name if base_name and base_name != name else "",
    )
