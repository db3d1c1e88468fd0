"""The worker's side of the rung table (``ktui.protocol.rungs``): the function that climbs each row.

``dumps`` is the one rung started early: its function starts writing the dumps on a thread and
returns the object whose ``finish`` is the rung (see ``dumps.py``)."""

from __future__ import annotations

from typing import Any, Callable

from ktui.worker.rungs import bench, compilation, correctness, dependence, dumps, fresh, integrity, precheck, run

IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "pre-checks": precheck.run,
    "compile": compilation.run,
    "dumps": dumps.start,
    "run": run.run,
    "correctness": correctness.run,
    fresh.NAME: fresh.run,
    "integrity": integrity.run,
    "dependence": dependence.run,
    "benchmark": bench.run,
}
