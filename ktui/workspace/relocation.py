"""Paths of this machine and where a run elsewhere has them: the one rule that rewrites them.

A run away from the kernel's files (``--remote``, a Ray node) sees the workspace, its run folder
and the GPU MODE modules kept outside it at other paths. The Job goes there with its paths moved
(``Relocation.json``), and what comes back — events, messages, tracebacks, a tool's JSON — has
them moved home again (``back``). The rule, both ways: a folder's path is replaced wherever it
occurs in a string, unless the characters after it continue its last name (``/ws`` is not in
``/ws2/k.py`` nor in ``/ws.bak``, yet it is in ``/ws/k.py`` and at the end of ``… in /ws.``); the
longest folder wins, and each occurrence is replaced once (a moved path is never moved again).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

_END = r"(?![\w-]|\.[\w-])"  # what does not continue a path's last name


class Relocation:
    """Folders and where they are moved to (``moves``: from → to); empty names are ignored."""

    def __init__(self, moves: Mapping[str, str]):
        self.moves = {source: target for source, target in moves.items() if source}
        alternatives = sorted(self.moves, key=len, reverse=True)
        self._pattern = re.compile("(" + "|".join(map(re.escape, alternatives)) + ")" + _END) if alternatives else None

    @property
    def back(self) -> Relocation:
        """The way home: each target moved to its source."""
        return Relocation({target: source for source, target in self.moves.items()})

    def text(self, value: str) -> str:
        """``value`` with every moved folder in it at its new place."""
        if self._pattern is None:
            return value
        return self._pattern.sub(lambda match: self.moves[match.group(1)], value)

    def json(self, value: Any) -> Any:
        """A JSON value with every string in it (dict keys too) moved as ``text`` moves it."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.json(k): self.json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v) for v in value]
        return value
