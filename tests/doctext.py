"""Markdown as the doc tests read it: the prose outside code, headings' anchors, links, tables.

GitHub's rules, as far as ktui's docs use them: one definition for test_docs.py and test_measured.py.
"""

from __future__ import annotations

import re
from pathlib import Path

FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
INLINE_CODE = re.compile(r"`(?:[^`\n]|\n(?!\s*\n))*`")  # a code span may wrap, never across a blank line
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
REFERENCE = re.compile(r"\[([^\]]+)\]\[([^\]]+)\]")  # [text][label]
DEFINITION = re.compile(r"^\[([^\]]+)\]:\s*(\S+)\s*$", re.M)  # [label]: target
HEADING = re.compile(r"#{1,6}\s+(.*)")


def prose(text: str) -> str:
    """The text outside code: code may hold ``](`` and ``#`` that are no links or headings."""
    return INLINE_CODE.sub("code", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        match = HEADING.match(line)
        if not match:
            continue
        anchor = slug(match.group(1))
        found.add(anchor if anchor not in seen else f"{anchor}-{seen[anchor]}")
        seen[anchor] = seen.get(anchor, 0) + 1
    return found


def link_targets(text: str) -> list[str]:
    """Every link's target: inline links and reference definitions."""
    plain = prose(text)
    return LINK.findall(plain) + [target for _, target in DEFINITION.findall(plain)]


def sections(text: str) -> list[tuple[str, str]]:
    """(the anchor of each ``##`` heading, the text up to the next one), outside fences."""
    found = []
    for part in re.split(r"(?m)^(?=## )", FENCE.sub("", text)):
        if part.startswith("## "):
            heading, _, body = part.partition("\n")
            found.append((slug(heading[3:]), body))
    return found


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each table in the text: its header's cells and its rows' cells (the ``---`` line dropped)."""
    found, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(cells(line))
            continue
        if len(block) >= 2:
            found.append((block[0], block[2:]))
        block = []
    return found
