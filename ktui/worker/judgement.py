"""Is one output right? The one rule every rung that judges an output uses.

ktui's metrics (``ktui.worker.metrics``) judge every output. Where the problem brings its own judge
(GPU MODE's ``check_implementation``), it runs on the same output, and the two are combined by
one documented rule, so no summary can call a kernel incorrect and passing at once:

- both accept → right; both reject → wrong, with both reasons;
- the problem's check rejects what ktui's metrics accept → wrong: the problem defines its own
  answer (its leaderboard runs that check), and the message says ktui's thresholds alone would pass;
- the problem's check accepts what ktui's default thresholds reject → right, and the message says
  where ktui's defaults would have drawn the line (a prefix sum's tolerance that grows with its
  length is the problem's to set).

Unwritten output (ktui's poison still there) is counted here and told by the caller: it fails,
whatever either judge says, with the count in the message (a grid that misses a tail and a
kernel that hopes for stale memory look the same, and the poison makes both wrong).

A wrong output gets its error map (``ktui.worker.errormap``): where its mismatches are, drawn as a
small grid (the figure ``error_map``) and said in one line at the end of its reason. Only a failing
judgement pays for it; a comparison expected to fail (the dependence rung's) asks for none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ktui.protocol.errormap import ErrorMap
from ktui.worker.errormap import locate
from ktui.worker.metrics import Comparison, compare
from ktui.worker.tier import unwritten

HEADLINE = ("max_abs", "max_rel", "mse", "rmse", "psnr", "cossim", "worst_index", "mismatched", "nonfinite")
CHECK_MESSAGE_LIMIT = 400  # characters of check_implementation's message kept in the figures


@dataclass
class Judgement:
    passed: bool
    figures: dict[str, Any]
    reasons: list[str] = field(default_factory=list)  # why it is wrong
    notes: list[str] = field(default_factory=list)  # a disagreement that did not decide; no signal
    unwritten: int = 0  # output elements still holding ktui's poison
    unwritten_where: str = ""
    maps: list[ErrorMap] = field(default_factory=list)  # of the outputs that are wrong, in order

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    @property
    def where(self) -> str:
        """Where the first wrong output is wrong, in one line ("" without an error map)."""
        return self.maps[0].description if self.maps else ""

    def map_figures(self) -> dict[str, Any]:
        """``{"error_map": …}`` of the first wrong output, for a rung's figures ({} without one)."""
        return {"error_map": self.maps[0].to_json()} if self.maps else {}


def judge(ctx, pristine: tuple, out: Any, pairs: list[tuple[torch.Tensor, torch.Tensor]], *,
          mapped: bool = True) -> Judgement:
    """Judge ``out`` (paired with the reference as ``pairs``) for the inputs ``pristine``; a wrong
    output gets its error map unless ``mapped`` is False.

    ``pristine`` must be a private copy: the problem's check may run its reference on it, and a
    GPU MODE reference writes into the output buffer it finds there.
    """
    never_written = [unwritten(o) for o, _ in pairs]
    results = [compare(o, r, ctx.tolerances) for o, r in pairs]
    verdict = _decided(ctx, pristine, out, results, never_written)
    if mapped and (not verdict.passed or verdict.unwritten):
        with ctx.phases.timing("error map"):
            _map(ctx, verdict, pairs, results, never_written)
    return verdict


def _map(ctx, verdict: Judgement, pairs: list, results: list[Comparison], never_written: list[int]) -> None:
    """The error map of each wrong output: in the figures, and said at the end of its reason."""
    several = len(pairs) > 1
    for i, ((o, r), result) in enumerate(zip(pairs, results)):
        if result.passed and not never_written[i]:
            continue
        found = locate(o, r, ctx.tolerances, peak=result.peak, output=i)
        if found is None:
            continue
        verdict.maps.append(found)
        if several:
            verdict.figures["outputs"][i]["error_map"] = found.to_json()
        reason = f"output {i}: {result.reason}" if several else result.reason
        if reason in verdict.reasons:
            verdict.reasons[verdict.reasons.index(reason)] = f"{reason}; {found.description}"
    verdict.figures.update(verdict.map_figures())


def _decided(ctx, pristine: tuple, out: Any, results: list[Comparison], never_written: list[int]) -> Judgement:
    """ktui's metrics and the problem's own check, combined by the module's rule."""
    figures: dict[str, Any] = {}
    if len(results) == 1:
        figures.update(results[0].figures)
    else:
        figures["outputs"] = [r.figures for r in results]
        worst = min(results, key=lambda r: _as_float(r.figures.get("psnr", float("inf"))))
        figures.update({k: worst.figures[k] for k in HEADLINE if k in worst.figures})
    failures = [f"output {i}: {r.reason}" if len(results) > 1 else r.reason for i, r in enumerate(results) if not r.passed]
    where = ", ".join(f"output {i}: {n}" for i, n in enumerate(never_written) if n)
    verdict = Judgement(not failures, figures, failures, unwritten=sum(never_written), unwritten_where=where)
    silent = [(i, r.note) for i, r in enumerate(results) if r.figures.get("no_signal")]
    if silent:  # a weak test, not a failure: the rung's figure and message say so
        figures["no_signal"] = True
        verdict.notes += [f"output {i}: {note}" if len(results) > 1 else note for i, note in silent]
    if not ctx.problem.has_check:
        return verdict

    ok, message = ctx.check(pristine, out)
    figures["check"] = {"passed": ok, "message": message[:CHECK_MESSAGE_LIMIT]}
    if ok and failures:
        verdict.passed, verdict.reasons = True, []
        verdict.notes.append("the problem's check_implementation accepts it and decides; ktui's default "
                             f"thresholds alone would not ({'; '.join(failures)})")
    elif not ok:
        alone = " (ktui's metrics alone would pass it)" if not failures else ""
        verdict.passed = False
        verdict.reasons = [f"check_implementation: {message}{alone}", *failures]
    return verdict


def _as_float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("inf")
