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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ktui.worker.metrics import compare
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

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


def judge(ctx, pristine: tuple, out: Any, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> Judgement:
    """Judge ``out`` (paired with the reference as ``pairs``) for the inputs ``pristine``.

    ``pristine`` must be a private copy: the problem's check may run its reference on it, and a
    GPU MODE reference writes into the output buffer it finds there.
    """
    never_written = [unwritten(o) for o, _ in pairs]
    results = [compare(o, r, ctx.tolerances) for o, r in pairs]
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
