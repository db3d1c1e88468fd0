"""Two normalised listings aligned instruction by instruction, written as a unified diff."""

from __future__ import annotations

import bisect
import difflib

from ktui.history.sassdiff.normalisation import shape_key


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
