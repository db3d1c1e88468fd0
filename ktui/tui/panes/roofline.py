"""The history pane's roofline view (``o``): each benchmark shape of the kernel's versions on this
GPU's roofline, log–log.

Drawn: the memory roof of each access mix a shape is held to (GB/s × FLOP/byte) up to the compute
roof of each dtype (TFLOP/s), each shape's launch floor (its FLOPs over the launch time: the rate
no launch of it can beat), each shape's attainable rate as its benchmark judged it, and the
points: the best version starred, the version shown in the other panes filled, the rest dots;
a point short of the stop threshold (each shape's fraction of its attainable time) hollow. The
key and the roofs' source (calibrated, or the datasheet's, provisional) are in the pane's head,
since plotext's legend would cover the points. Plotext draws the logarithms of the values on
linear axes, labelled with the values themselves.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual_plotext import PlotextPlot

from ktui.history.roofline_chart import Point, Roofs

BEST, SHOWN, OTHER = ("★", "☆"), ("●", "○"), ("•", "◦")  # each: reached the stop threshold, short of it
ATTAINABLE = "─"
LAUNCH = "╌"
LAUNCH_SPAN = 1.6  # a shape's launch floor is drawn this factor either side of its intensity
MARGIN = 3.0  # the roofs and floors reach this factor past the points
PAD = 0.15  # decades the axes reach past what is drawn


def roofline_head(points: list[Point], roofs: Roofs | None, why: str, best: int | None, shown: int | None,
                  elsewhere: int) -> Text:
    """The lines above the chart: the GPU and where its roofs come from, the roofs, then the key."""
    text = Text()
    if roofs is None:
        text.append(f"roofline: no ceilings for {points[0].device if points else 'this GPU'}", style="bold")
        text.append(f" · {why}\n" if why else "\n")
        return text
    text.append(f"roofline · {roofs.device} · ", style="bold")
    if roofs.provisional:
        text.append(f"{roofs.source}, provisional: not calibrated here", style="bold yellow")
    else:
        text.append(roofs.source)
    text.append(" · o: speedup\n")
    memory = sorted({roofs.memory(p.read_share) for p in points} - {None}, key=lambda m: m[1])
    compute = sorted({p.dtype for p in points if p.dtype in roofs.ceiling.tflops})
    parts = [", ".join(f"{gbs:.0f} GB/s {title}" for title, gbs in memory)]
    if compute:
        parts.append(", ".join(f"{d} {roofs.ceiling.tflops[d]:g}" for d in compute) + " TFLOP/s")
    launch = roofs.ceiling.launch
    parts.append(f"{LAUNCH} launch floor {launch.seconds * 1e6:.2f} µs" if launch else "no launch floor (not calibrated)")
    text.append(" · ".join(parts) + "\n")
    if best is not None:
        text.append(f"{BEST[0]} best v{best} ", style="bold green")
    if shown is not None and shown != best:
        text.append(f"{SHOWN[0]} v{shown} ", style="bold cyan")
    text.append(f"{OTHER[0]} others {ATTAINABLE} attainable · hollow: under {roofs.done * 100:.0f}% of it (stop)")
    if elsewhere:
        text.append(f" · {elsewhere} on another GPU not drawn", style="dim")
    return text


def draw_roofline(plot: PlotextPlot, points: list[Point], roofs: Roofs, best: int | None, shown: int | None) -> None:
    plt = plot.plt
    plt.clear_data()
    plt.clear_figure()
    tflops = roofs.ceiling.tflops
    dtypes = sorted({p.dtype for p in points if p.dtype in tflops})
    memory = sorted({roofs.memory(p.read_share) for p in points} - {None}, key=lambda m: m[1])
    peak = max((tflops[d] for d in dtypes), default=max(p.tflops for p in points))
    ridges = [tflops[d] * 1e3 / gbs for d in dtypes for _, gbs in memory]  # where a memory roof meets a compute one
    x_low = min([p.intensity for p in points] + ridges) / MARGIN
    x_high = max([p.intensity for p in points] + ridges) * MARGIN
    launch = roofs.ceiling.launch
    caps = [_launch_cap(p, launch.seconds) for p in points] if launch else []
    y_low = min([p.tflops for p in points] + caps + [gbs * x_low / 1e3 for _, gbs in memory]) / MARGIN
    y_high = peak * MARGIN
    for _, gbs in memory:  # GB/s × FLOP/byte, in TFLOP/s, up to the highest compute roof
        top = max((tflops[d] for d in dtypes), default=y_high)
        _line(plt, [x_low, top * 1e3 / gbs], [gbs * x_low / 1e3, top], "cyan")
    for d in dtypes:
        _line(plt, [min(tflops[d] * 1e3 / gbs for _, gbs in memory) if memory else x_low, x_high], [tflops[d]] * 2,
              "cyan")
    for p, cap in zip(points, caps):
        if cap < y_high:
            _line(plt, [p.intensity / LAUNCH_SPAN, p.intensity * LAUNCH_SPAN], [cap, cap], "orange", LAUNCH)
    attained = [p for p in points if p.attainable_tflops]
    if attained:
        plt.scatter(_log([p.intensity for p in attained]), _log([p.attainable_tflops for p in attained]),
                    marker=ATTAINABLE, color="white")
    for marks, color, chosen in ((OTHER, "gray", [p for p in points if p.version not in (best, shown)]),
                                 (SHOWN, "cyan", [p for p in points if p.version == shown and p.version != best]),
                                 (BEST, "green", [p for p in points if p.version == best])):
        for reached in (True, False):
            drawn = [p for p in chosen if p.reached is reached]
            if drawn:
                plt.scatter(_log([p.intensity for p in drawn]), _log([p.tflops for p in drawn]),
                            marker=marks[0 if reached else 1], color=color)
    # a little past what is drawn: plotext puts a line's last dot beyond a limit it ends on
    plt.xlim(math.log10(x_low) - PAD, math.log10(x_high) + PAD)
    plt.ylim(math.log10(y_low) - PAD, math.log10(y_high) + PAD)
    plt.xticks(*_decades(x_low, x_high))
    plt.yticks(*_decades(y_low, y_high))
    plt.xlabel("FLOP/byte")
    plt.ylabel("TFLOP/s")


def _launch_cap(p: Point, seconds: float) -> float:
    """The rate a shape cannot beat in one launch: its FLOPs over the launch floor, in TFLOP/s."""
    flops = p.tflops * 1e12 * p.kernel_us * 1e-6
    return flops / seconds / 1e12


def _line(plt, xs: list[float], ys: list[float], color: str, marker: str = "braille") -> None:
    plt.plot(_log(xs), _log(ys), marker=marker, color=color)


def _log(values: list[float]) -> list[float]:
    return [math.log10(v) for v in values]


def _decades(low: float, high: float) -> tuple[list[float], list[str]]:
    """Ticks at the powers of ten between ``low`` and ``high`` (and at 2× and 5× them where fewer
    than three powers fit), labelled with their values, in logarithms."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1,) if last - first > 3 else (1, 2, 5)
    values = [m * 10.0 ** e for e in range(first, last + 1) for m in steps if low <= m * 10.0 ** e <= high]
    return [math.log10(v) for v in values], [_value(v) for v in values]


def _value(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"
