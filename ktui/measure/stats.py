"""The statistics of kernel timing: summaries, when to stop sampling, ratios with confidence.

Pure functions of lists of numbers, so every rule the benchmark follows can be checked on a CPU
with synthetic samples. The GPU side (``ktui.worker.timing.sampler``) only collects the samples.

- The headline figure is the **median**: GPU timings have a hard floor and a long right tail
  (a preempted launch, a clock dip), so the mean chases outliers and the median does not.
- Its precision is the **relative standard error of the median**: the larger of the
  distribution-free estimator of McKean & Schrader (1984) — half the width of the order-statistic
  confidence interval of the median, over the normal quantile — and the normal-theory estimate
  from the IQR. It costs one sort, so it can be evaluated while sampling.
- **When to stop**: as soon as every timed callable's median is known to ``rse_target``
  (default 0.5%) with at least ``min_samples`` samples, or when the time cap is reached.
- **Ratios** (speedup = reference median / kernel median) get a percentile-bootstrap interval
  over the paired samples of interleaved rounds, with a fixed seed: the same samples always give
  the same interval.
- **Labels** (faster / slower / within noise) compare an interval with 1, widened by a noise
  floor for what one run cannot see of the next (clocks, placement, a different process).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

Z95 = 1.959963984540054  # two-sided 95% normal quantile

# Stop reasons.
NOISE = "noise"  # every median reached the target precision
CAP = "cap"  # the time cap was reached first
MAX_SAMPLES = "max_samples"  # the sample limit was reached first

# Labels.
FASTER = "faster"
SLOWER = "slower"
WITHIN_NOISE = "within noise"


def normal_quantile(p: float) -> float:
    """The standard normal quantile, by bisection on ``erf`` (no SciPy needed)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def z_for(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return Z95 if confidence == 0.95 else normal_quantile(0.5 + confidence / 2)


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (the common 'type 7' definition)."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("no samples")
    pos = q * (n - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def median_standard_error(sorted_values: Sequence[float]) -> float:
    """The larger of two estimates of the median's standard error (inf below 3 samples).

    - McKean–Schrader: ``(x_(n-c+1) - x_(c)) / (2 z)`` with ``c = (n+1)/2 - z sqrt(n/4)``, where
      ``[x_(c), x_(n-c+1)]`` is the distribution-free ~95% interval of the median (its coverage
      comes from the binomial count of samples below the median);
    - the normal-theory ``sqrt(pi/2) · sigma / sqrt(n)`` with sigma from the IQR (``IQR / 1.349``).

    Each alone underestimates now and then on small samples — and a stopping rule stops exactly
    on those underestimates. Taking the larger (on 5%-spread samples, simulated) moved the
    earliest stop from a tenth of the samples the target needs to half of them.
    """
    n = len(sorted_values)
    if n < 3:
        return math.inf
    c = round((n + 1) / 2 - Z95 * math.sqrt(n / 4))
    c = min(max(c, 1), (n + 1) // 2)
    order_statistic = (sorted_values[n - c] - sorted_values[c - 1]) / (2 * Z95)
    iqr = quantile(sorted_values, 0.75) - quantile(sorted_values, 0.25)
    normal_theory = math.sqrt(math.pi / 2) * (iqr / 1.349) / math.sqrt(n)
    return max(order_statistic, normal_theory)


@dataclass(frozen=True)
class Summary:
    """One callable's timing samples, described."""

    n: int
    median: float
    mean: float
    min: float
    max: float
    q1: float
    q3: float
    stdev: float
    rse_median: float  # standard error of the median / median
    rse_mean: float  # standard error of the mean / mean

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


def summarize(samples: Sequence[float]) -> Summary:
    values = sorted(float(v) for v in samples)
    n = len(values)
    if n == 0:
        raise ValueError("no samples to summarise")
    if any(math.isnan(v) for v in values):
        raise ValueError("a timing sample is NaN")
    median = quantile(values, 0.5)
    mean = math.fsum(values) / n
    stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else math.inf
    return Summary(
        n=n,
        median=median,
        mean=mean,
        min=values[0],
        max=values[-1],
        q1=quantile(values, 0.25),
        q3=quantile(values, 0.75),
        stdev=stdev,
        rse_median=_relative(median_standard_error(values), median),
        rse_mean=_relative(stdev / math.sqrt(n), mean),
    )


def relative_standard_error(samples: Sequence[float]) -> float:
    """Standard error of the median over the median (inf while it cannot be known)."""
    values = sorted(samples)
    if len(values) < 3:
        return math.inf
    return _relative(median_standard_error(values), quantile(values, 0.5))


def _relative(se: float, centre: float) -> float:
    if math.isinf(se):
        return math.inf
    if centre <= 0:
        return math.inf if se > 0 else 0.0
    return se / centre


@dataclass(frozen=True)
class StoppingRule:
    """When to stop repeating a measurement.

    Stop on **noise** once every sample set has ``min_samples`` and its median's relative
    standard error is at most ``rse_target``; stop on the **cap** once ``time_cap_s`` has passed
    with ``min_samples`` each, or, whatever the count, after ``hard_cap_factor`` times the cap
    (a reference that takes seconds per call must not outlive the rung's timeout); stop at
    ``max_samples`` to bound memory and the bootstrap's cost.
    """

    rse_target: float = 0.005
    min_samples: int = 20
    time_cap_s: float = 3.0
    max_samples: int = 20000
    hard_cap_factor: float = 5.0

    def __post_init__(self) -> None:
        if not 0 < self.rse_target < 1:
            raise ValueError(f"rse_target must be in (0, 1), got {self.rse_target}")
        if self.min_samples < 3:
            raise ValueError(f"min_samples must be at least 3, got {self.min_samples}")
        if self.time_cap_s <= 0:
            raise ValueError(f"time_cap_s must be positive, got {self.time_cap_s}")
        if self.max_samples < self.min_samples:
            raise ValueError(f"max_samples ({self.max_samples}) is below min_samples ({self.min_samples})")

    def decide(self, sample_sets: Sequence[Sequence[float]], elapsed_s: float) -> str | None:
        """The stop reason, or None to keep sampling."""
        n = min((len(s) for s in sample_sets), default=0)
        if n >= self.max_samples:
            return MAX_SAMPLES
        if n >= self.min_samples and all(relative_standard_error(s) <= self.rse_target for s in sample_sets):
            return NOISE
        if elapsed_s >= self.time_cap_s and (n >= self.min_samples or elapsed_s >= self.hard_cap_factor * self.time_cap_s):
            return CAP
        return None

    def check_due(self, n: int, last_checked: int) -> bool:
        """Evaluate the rule every sample while cheap, then every 5% more samples (it sorts)."""
        return n - last_checked >= max(1, n // 20)


@dataclass(frozen=True)
class Interval:
    """A point estimate of a ratio with its confidence interval."""

    point: float
    low: float
    high: float
    confidence: float = 0.95

    @property
    def log_se(self) -> float:
        """The standard error of log(ratio) this interval implies (normal approximation)."""
        if self.low <= 0 or self.high <= 0:
            return math.inf
        return (math.log(self.high) - math.log(self.low)) / (2 * z_for(self.confidence))

    def as_list(self) -> list[float]:
        return [self.low, self.high]


def ratio_from_medians(old: float, old_rse: float, new: float, new_rse: float, confidence: float = 0.95) -> Interval:
    """``old / new`` for two medians measured apart (two runs): log-normal interval from their
    relative standard errors, ``se(log ratio) = sqrt(rse_old² + rse_new²)``."""
    if old <= 0 or new <= 0:
        raise ValueError(f"medians must be positive, got {old} and {new}")
    z = z_for(confidence)
    se = math.sqrt(old_rse**2 + new_rse**2)
    point = old / new
    return Interval(point=point, low=point * math.exp(-z * se), high=point * math.exp(z * se), confidence=confidence)


def geometric_mean(values: Sequence[float]) -> float:
    positive = [float(v) for v in values if v > 0]
    if not positive:
        raise ValueError("a geometric mean needs positive values")
    return math.exp(math.fsum(math.log(v) for v in positive) / len(positive))


def geometric_mean_interval(intervals: Sequence[Interval]) -> Interval:
    """The geometric mean of several ratios, its interval from their log standard errors
    (treated as independent: each shape is its own measurement)."""
    if not intervals:
        raise ValueError("no intervals")
    confidence = intervals[0].confidence
    k = len(intervals)
    centre = math.fsum(math.log(i.point) for i in intervals) / k
    se = math.sqrt(math.fsum(i.log_se**2 for i in intervals)) / k
    z = z_for(confidence)
    return Interval(math.exp(centre), math.exp(centre - z * se), math.exp(centre + z * se), confidence)


def label(interval: Interval, floor: float = 0.0) -> str:
    """``faster`` when the whole interval, widened by ``floor``, lies above 1; ``slower`` when it
    lies below; else ``within noise``. The ratio reads as 'times faster' (old/new, ref/kernel)."""
    if floor < 0:
        raise ValueError(f"a noise floor cannot be negative, got {floor}")
    if interval.low > 1 + floor:
        return FASTER
    if interval.high < 1 / (1 + floor):
        return SLOWER
    return WITHIN_NOISE
