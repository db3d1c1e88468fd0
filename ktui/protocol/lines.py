"""How rungs and runs read as text: the CLI's lines, and the figures the dashboard shows.

One place decides which figures matter for each rung and how each number is written, so that
``ktui run`` and the dashboard say the same thing the same way.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ktui.protocol import sandbox
from ktui.protocol.dsls import compile_only_titles
from ktui.protocol.events import compile_only_text
from ktui.protocol.job import rung_family
from ktui.protocol.rungs import RUNGS

# The figures worth a glance, per rung family, in display order.
KEY_FIGURES: dict[str, tuple[str, ...]] = {rung.name: rung.figures for rung in RUNGS}  # the rung table's


def fmt(key: str, value: Any) -> str:
    """One figure as text: ``psnr`` with one decimal, ``cossim`` with six, errors in 2 significant digits."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if key == "cossim":
            return f"{value:.6f}"
        if key == "psnr":
            return f"{value:.1f}"
        if key in ("speedup",):
            return f"{value:.2f}x"
        if key == "roofline":
            return f"{value * 100:.0f}%"
        if key.endswith("_s"):
            return f"{value:.2f}"
        if key.endswith("_gb"):
            return f"{value:.1f}" if value >= 1 else f"{value:.3g}"
        if key.endswith("_us") or key in ("gbps", "tflops"):
            return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:.0f}"
        if key.endswith("_rse"):
            return f"{value:.2%}"
        return f"{value:.2g}" if value != 0 else "0"
    if isinstance(value, (list, tuple)):
        if key in ("speedup_ci", "graph_speedup_ci", "vs_ci") and len(value) == 2:
            return f"[{value[0]:.2f},{value[1]:.2f}]"
        return "[" + ",".join(fmt(key, v) for v in value) + "]"
    return str(value)


# Counters shown only when they are not zero, flags only when they are raised.
QUIET_WHEN_ZERO = {"mismatched", "nonfinite"}
QUIET_WHEN_FALSE = {"at_roofline", "impossible", "throttled", "no_signal"}


def key_figures(rung: str, figures: dict[str, Any]) -> list[tuple[str, str]]:
    keys = KEY_FIGURES.get(rung_family(rung), ())
    return [
        (k, label_text(figures) if k == "label" else fmt(k, figures[k]))
        for k in keys
        if k in figures and figures[k] is not None
        and not (k in QUIET_WHEN_ZERO and figures[k] == 0)
        and not (k in QUIET_WHEN_FALSE and figures[k] is not True)
    ]


def label_text(figures: dict[str, Any]) -> str:
    """A version comparison in words: ``faster than v3 (1.12x)``, ``within noise of v3 (0.99x)``."""
    label = figures.get("label")
    version = figures.get("vs_version", figures.get("version"))
    ratio = figures.get("vs_ratio", figures.get("ratio"))
    if version is None:
        return str(label)
    word = "of" if label == "within noise" else "than"
    ratio_text = f" ({ratio:.2f}x)" if isinstance(ratio, (int, float)) else ""
    return f"{label} {word} v{version}{ratio_text}"


def rung_line(event: dict[str, Any]) -> str:
    """``[correctness[rows=128,cols=1000]] ok max_abs=3.2e-08 psnr=141.2 cossim=1.000000``"""
    figures = " ".join(f"{k}={v}" for k, v in key_figures(event["rung"], event.get("figures") or {}))
    parts = [f"[{event['rung']}]", event["status"]]
    if figures:
        parts.append(figures)
    message = (event.get("message") or "").strip()
    if message and (event["status"] != "ok" or not figures):
        first = without_word(event["status"], message.splitlines()[0])
        parts.append(first if event["status"] == "ok" else f"— {first}")
    line = " ".join(parts)
    error = event.get("error")
    if event["status"] != "ok" and error and error.get("location"):
        loc = error["location"]
        line += f"\n    at {os.path.relpath(loc['file'])}:{loc['line']}"
        if loc.get("col"):
            line += f":{loc['col']}"
        if loc.get("excerpt"):
            line += "\n" + "\n".join("    " + text for text in loc["excerpt"].splitlines())
    return line


def same_skip(record: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two rungs were skipped for one reason: they read as one line (CLI) or row (dashboard)."""
    return record["status"] == other["status"] == "skipped" and record.get("message") == other.get("message")


def folded_names(names: list[str]) -> str:
    """Rung names in short, each family once with its count: ``run, correctness ×5, fresh-shapes``."""
    counts: dict[str, int] = {}
    for name in names:
        counts[rung_family(name)] = counts.get(rung_family(name), 0) + 1
    return ", ".join(f"{family} ×{n}" if n > 1 else family for family, n in counts.items())


def folded_line(records: list[dict[str, Any]]) -> str:
    """Rungs skipped for one reason, as one line: ``[run, correctness ×5, integrity] skipped — <why>``;
    one rung as ``rung_line`` writes it."""
    if len(records) == 1:
        return rung_line(records[0])
    return f"[{folded_names([r['rung'] for r in records])}] skipped — {(records[0].get('message') or '').strip()}"


def without_word(word: str, message: str) -> str:
    """A message that starts with the status it explains (``cancelled: stopped by SIGINT``) told
    after that status without saying it twice: ``stopped by SIGINT``."""
    return message[len(word) + 2:] if message.startswith(f"{word}: ") else message


def where_text(tier: str, device: str, arch: str, precheck_figures: dict[str, Any] | None = None) -> str:
    """A run's header: where it runs and what that checks. On the CPU tier a kernel of a DSL that
    cannot run there is compiled only (``cpu · CPU tier: CuTeDSL compiled for sm_90a only, not run``),
    known once its pre-checks have found its kernels (``compile_only``: those DSLs; runs stored
    before that figure existed only list their kernels, by DSL)."""
    if tier == "-":
        return "not run"
    figures = precheck_figures or {}
    only = figures.get("compile_only") or compile_only_titles(figures)
    if tier == "cpu" and only:
        return f"{tier} · {compile_only_text(arch, only)}"
    return f"{tier} · {device} · {arch}"


def best_text(best: dict[str, Any]) -> str:
    """The comparison with the best earlier version: ``new best (1.05x over v2)``."""
    version, ratio = best.get("version"), best.get("ratio", 1.0)
    if best.get("label") == "faster":
        return f"new best ({ratio:.2f}x over v{version})"
    if best.get("label") == "slower":
        return f"slower than the best, v{version} ({ratio:.2f}x)"
    return f"as fast as the best, v{version}"


def summary_line(kernel: str, version: int, verdict: str, summary: dict[str, Any], tier: str, arch: str,
                 duration_s: float, message: str = "") -> str:
    """``softmax_triton v3 passed · 4/4 correct · 2.31x · gpu sm_90a · 3.2 s``"""
    parts = [f"{kernel} v{version} {verdict}"]
    correct = summary.get("correct")
    if correct:
        parts.append(f"{correct[0]}/{correct[1]} correct")
    elif verdict == "compiled":
        parts.append(f"not run: {summary.get('unchecked') or 'compiled only'}")
    elif summary.get("unchecked") and verdict == "passed":
        parts.append(f"correctness not checked: {summary['unchecked']}")
    judged = "trusted" in summary  # runs stored before the field say weak test and no signal by themselves
    if summary.get("weak_test") is not None and not judged:  # a cached `ktui audit` of the reference says weak
        parts.append(f"weak test: {summary['weak_test'].split(' — ')[0]}" if summary["weak_test"] else "weak test")
    if summary.get("no_signal") and not _untrusted_for(summary, NO_SIGNAL_EVERYWHERE):
        parts.append(f"no signal on {', '.join(summary['no_signal'])}: a zero kernel would pass")
    if judged and verdict == "passed":
        parts.append(trust_text(summary))
    if summary.get("reference_changed"):  # judged by the reference as snapshotted when the run started
        parts.append(f"reference changed during the run: judged against the recorded {summary['reference_changed']['recorded']}")
    if summary.get("threads_left"):  # threads user code left running: the worker was replaced
        parts.append(f"left {len(summary['threads_left'])} thread(s) running ({', '.join(summary['threads_left'][:3])}): "
                     "its worker was replaced")
    if summary.get("checks"):  # runs recorded while the problem's check had rungs of its own
        parts.append(f"{summary['checks'][0]}/{summary['checks'][1]} problem checks")
    if "speedup" in summary:
        ci = summary.get("speedup_ci")
        ci_text = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if isinstance(ci, list) and len(ci) == 2 else ""
        parts.append(f"{summary['speedup']:.2f}x{ci_text} vs reference")
    parts += roofline_parts(summary)
    if isinstance(summary.get("calibration_s"), (int, float)):  # the GPU's one-time calibration, not the kernel's
        parts.append(f"GPU calibrated first in {summary['calibration_s']:.1f} s, once for every workspace")
    if summary.get("impossible"):
        parts.append(f"IMPOSSIBLE: faster than the hardware allows on {', '.join(summary['impossible'])}")
    previous, best = summary.get("vs_previous"), summary.get("vs_best")
    if previous:
        parts.append(label_text(previous))
    if best and (not previous or best.get("version") != previous.get("version")):
        parts.append(best_text(best))
    if summary.get("throttled"):
        parts.append("GPU throttled")
    memory = memory_text(summary)
    if memory:
        parts.append(memory)
    failure = summary.get("first_failure")
    settled = verdict in ("passed", "compiled")
    if not settled and failure:
        parts.append(f"{failure['rung']}: {without_word(verdict, failure['message']) or failure['status']}"
                     if failure["rung"] else without_word(verdict, failure["message"]) or failure["status"])
    elif not settled and message:
        parts.append(without_word(verdict, message.splitlines()[0]))
    if tier not in ("", "-"):
        parts.append(f"{tier} {arch}")
    warning = sandbox.warning(summary.get("confined"), summary.get("confinement") or "")
    if warning:
        parts.append(warning)
    place = summary.get("ran_on") or {}  # `ktui run --ray`: the node and GPU that ran it
    if place.get("node"):
        parts.append(f"on {place['node']}" + (f" gpu {place['gpu']}" if place.get("gpu") is not None else ""))
    parts.append(f"{duration_s:.1f} s")
    return " · ".join(parts)


NO_SIGNAL_EVERYWHERE = "no signal on every shape"  # how ``ktui.dispatch.trust`` begins that reason


def trust_text(summary: dict[str, Any]) -> str:
    """Whether a pass can be trusted, in words (``ktui.dispatch.trust`` decides): ``trusted``,
    ``NOT TRUSTED: weak test: a kernel of zeros passes`` or ``trust pending: <why>``."""
    trusted, reasons = summary.get("trusted"), summary.get("trust_reasons") or []
    if trusted is True:
        return "trusted"
    if trusted == "pending":
        return "trust pending: " + (reasons[0] if reasons else "its reference has no audit yet")
    return "NOT TRUSTED: " + ("; ".join(reasons) if reasons else "see its trust_reasons")


def _untrusted_for(summary: dict[str, Any], reason: str) -> bool:
    return any(str(r).startswith(reason) for r in summary.get("trust_reasons") or [])


def roofline_parts(summary: dict[str, Any]) -> list[str]:
    """The worst shape and the stop decision, never a mean across shapes:
    ``worst 73% of attainable at size=4194304 (memory-bound)``, ``not satisfied: size=4194304 short``
    or ``satisfied: every shape ≥ 90%``, or, without the launch floor, ``roofline provisional, no
    stop decision: <why>``; none for a run without per-shape figures."""
    worst = summary.get("roofline_worst")
    if not isinstance(worst, dict) or not isinstance(worst.get("roofline"), (int, float)):
        return []
    parts = [f"worst {worst['roofline'] * 100:.0f}% of attainable at {worst.get('shape')} ({worst.get('bound')})"]
    if summary.get("roofline_provisional"):
        return [*parts, f"roofline provisional, no stop decision: {summary['roofline_provisional']}"]
    done = summary.get("roofline_done", 0.9)
    if summary.get("satisfied") is True:
        parts.append(f"satisfied: every shape ≥ {done * 100:.0f}%")
    else:
        short = summary.get("short") or []
        parts.append(f"not satisfied: {', '.join(short)} short of {done * 100:.0f}%")
    return parts


def confinement_note(confined: bool | None, confinement: str) -> str:
    """`` · not confined: <why>`` where user code ran unconfined, the whole sandbox line where a
    protection did not hold; else nothing (``protocol.sandbox``)."""
    warning = sandbox.warning(confined, confinement)
    return f" · {warning}" if warning else ""


RATIO_FROM_GB = 1.0  # problems smaller than this show their peak beside their footprint, without a ratio


def memory_text(summary: dict[str, Any]) -> str:
    """``peak 19.4 GB (1.3× the problem's 14.6 GB)``; empty without a measured peak (CPU tier)."""
    peak, footprint, ratio = summary.get("peak_mem_gb"), summary.get("footprint_gb"), summary.get("mem_ratio")
    if not isinstance(peak, (int, float)):
        return ""
    if isinstance(footprint, (int, float)) and footprint < RATIO_FROM_GB:
        # fixed costs (the CUDA context's allocations, the metrics' chunk, L2-rotation input sets)
        # dominate a small problem: a ratio would only measure them
        return f"peak {fmt('peak_mem_gb', peak)} GB (the problem's own {fmt('footprint_gb', footprint)} GB)"
    if isinstance(footprint, (int, float)) and isinstance(ratio, (int, float)):
        return f"peak {fmt('peak_mem_gb', peak)} GB ({ratio:.1f}× the problem's {fmt('footprint_gb', footprint)} GB)"
    return f"peak {fmt('peak_mem_gb', peak)} GB"
