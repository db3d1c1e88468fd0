"""What a run judged, without what it measured: each kernel's verdict, its rungs and their statuses
in order, and the checks' figures less their seconds (``_s``, ``_us``, ``_ms``). Two runs of one
version with one seed must agree on it, however fast each was."""

from __future__ import annotations

from conftest import by_kernel

CHECKS = ("run", "correctness[", "fresh-shapes", "integrity", "dependence")


def untimed(figures: dict) -> dict:
    return {k: untimed(v) if isinstance(v, dict) else v for k, v in figures.items()
            if not k.endswith(("_s", "_us", "_ms"))}


def what_was_judged(events: list[dict]) -> dict:
    judged = {}
    for kernel, mine in by_kernel(events).items():
        ladder = [(e["rung"], e["status"]) for e in mine if e["type"] == "rung_finished"]
        checks = {e["rung"]: untimed(e.get("figures") or {}) for e in mine
                  if e["type"] == "rung_finished" and e["rung"].startswith(CHECKS)}
        verdict = next(e["verdict"] for e in mine if e["type"] == "run_finished")
        judged[kernel] = {"verdict": verdict, "ladder": ladder, "checks": checks}
    return judged
