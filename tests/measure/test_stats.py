"""The timing statistics on synthetic samples: summaries, the stopping rule, ratio intervals, labels."""

import math
import random

import pytest

from ktui.measure import stats
from ktui.measure.stats import CAP, FASTER, MAX_SAMPLES, NOISE, SLOWER, WITHIN_NOISE, Interval, StoppingRule
from ktui.worker.timing.bootstrap import ratio_of_medians

pytestmark = pytest.mark.unit


def gaussian(n, mean=100.0, sd=1.0, seed=0):
    rng = random.Random(seed)
    return [rng.gauss(mean, sd) for _ in range(n)]


def test_summary_reports_median_mean_min_max_and_quartiles():
    s = stats.summarize([5, 1, 9, 3, 7, 2, 8, 4, 6])
    assert (s.n, s.median, s.mean, s.min, s.max) == (9, 5, 5, 1, 9)
    assert (s.q1, s.q3, s.iqr) == (3, 7, 4)


def test_the_median_ignores_a_launch_outlier_that_drags_the_mean():
    s = stats.summarize([10.0] * 99 + [1000.0])
    assert s.median == 10.0 and s.mean == pytest.approx(19.9)


def test_median_standard_error_agrees_with_normal_theory_for_large_samples():
    # For normal data the median's standard error is sqrt(pi/2) * sd / sqrt(n).
    for seed in range(3):
        values = sorted(gaussian(20000, sd=2.0, seed=seed))
        expected = math.sqrt(math.pi / 2) * 2.0 / math.sqrt(20000)
        assert stats.median_standard_error(values) == pytest.approx(expected, rel=0.15)


def test_small_samples_rarely_look_more_precise_than_they_are():
    # The rule stops on the first estimate below target, so underestimates are what matter:
    # over 100 sample streams with a 5% spread (the target needs ~160 samples), none stops
    # before 60, where the true relative error is still 1.6x the target.
    rule = StoppingRule(rse_target=0.005, min_samples=10, time_cap_s=1e9)
    stops = []
    for seed in range(100):
        samples = gaussian(1000, mean=100, sd=5, seed=seed)
        stops.append(next(n for n in range(10, 1000) if rule.decide([samples[:n]], 0.0) == NOISE))
    assert min(stops) >= 60
    assert 120 < sorted(stops)[50] < 220


def test_relative_standard_error_is_unknown_below_three_samples():
    assert stats.relative_standard_error([1.0, 1.0]) == math.inf
    assert stats.relative_standard_error([1.0, 1.0, 1.0]) == 0.0


def test_rule_never_stops_on_noise_before_the_minimum_count():
    rule = StoppingRule(rse_target=0.005, min_samples=10)
    assert StoppingRule().min_samples == 20
    quiet = [1.0] * 9
    assert rule.decide([quiet], elapsed_s=0.1) is None
    assert rule.decide([quiet + [1.0]], elapsed_s=0.1) == NOISE


def test_rule_stops_as_soon_as_the_median_is_precise_enough():
    rule = StoppingRule(rse_target=0.005, min_samples=10, time_cap_s=1e9)
    samples = gaussian(20000, mean=100, sd=5, seed=1)  # 5% spread: ~(1.25*5/0.5)^2 ≈ 160 samples
    stopped_at = next(n for n in range(10, 20000) if rule.decide([samples[:n]], elapsed_s=0.0) == NOISE)
    assert 100 < stopped_at < 400
    assert stats.relative_standard_error(samples[:stopped_at]) <= 0.005
    assert stats.relative_standard_error(samples[: stopped_at - 1]) > 0.005


def test_rule_stops_on_the_cap_when_the_noise_never_settles():
    rule = StoppingRule(rse_target=0.005, min_samples=10, time_cap_s=3.0)
    noisy = gaussian(50, mean=100, sd=50, seed=2)
    assert rule.decide([noisy], elapsed_s=2.9) is None
    assert rule.decide([noisy], elapsed_s=3.0) == CAP


def test_the_cap_waits_for_the_minimum_count_until_the_hard_limit():
    rule = StoppingRule(rse_target=0.005, min_samples=10, time_cap_s=2.0, hard_cap_factor=5)
    slow_reference = gaussian(4, sd=30, seed=3)
    assert rule.decide([slow_reference], elapsed_s=5.0) is None
    assert rule.decide([slow_reference], elapsed_s=10.0) == CAP


def test_the_noisier_of_two_interleaved_callables_decides():
    rule = StoppingRule(rse_target=0.005, min_samples=10, time_cap_s=1e9)
    kernel = gaussian(100, sd=0.1, seed=4)
    reference = gaussian(100, sd=20, seed=5)
    assert rule.decide([kernel], 0.0) == NOISE
    assert rule.decide([kernel, reference], 0.0) is None


def test_rule_stops_at_the_sample_limit():
    rule = StoppingRule(min_samples=10, max_samples=50, time_cap_s=1e9)
    assert rule.decide([gaussian(50, sd=80, seed=6)], 0.0) == MAX_SAMPLES


def test_the_rule_is_evaluated_every_sample_early_and_every_five_percent_later():
    rule = StoppingRule()
    assert rule.check_due(5, 4)
    assert not rule.check_due(1000, 980) and rule.check_due(1000, 950)


@pytest.mark.parametrize("kwargs, words", [
    ({"rse_target": 0}, "rse_target"),
    ({"rse_target": 1.5}, "rse_target"),
    ({"min_samples": 2}, "min_samples"),
    ({"time_cap_s": 0}, "time_cap_s"),
    ({"min_samples": 20, "max_samples": 10}, "max_samples"),
])
def test_a_bad_rule_says_which_setting(kwargs, words):
    with pytest.raises(ValueError, match=words):
        StoppingRule(**kwargs)


def test_speedup_interval_covers_the_true_ratio_and_is_deterministic():
    kernel = gaussian(500, mean=10, sd=0.3, seed=7)
    reference = gaussian(500, mean=25, sd=0.8, seed=8)
    a = ratio_of_medians(reference, kernel)
    b = ratio_of_medians(reference, kernel)
    assert a == b
    assert a.low < 2.5 < a.high and a.low <= a.point <= a.high
    assert a.high / a.low < 1.03
    other_seed = ratio_of_medians(reference, kernel, seed=1)
    assert other_seed != a and other_seed.point == a.point


def test_pairing_cancels_a_drift_that_slowed_kernel_and_reference_together():
    rng = random.Random(9)
    drift = [1 + 0.2 * math.sin(i / 15) for i in range(400)]  # clocks wandering by ±20%
    kernel = [10 * d * rng.gauss(1, 0.002) for d in drift]
    reference = [30 * d * rng.gauss(1, 0.002) for d in drift]
    paired = ratio_of_medians(reference, kernel, paired=True)
    unpaired = ratio_of_medians(reference, kernel, paired=False)
    assert paired.low < 3.0 < paired.high
    assert (paired.high - paired.low) < (unpaired.high - unpaired.low) / 3


def test_speedup_interval_has_about_its_nominal_coverage():
    rng = random.Random(10)
    covered = 0
    trials = 60
    for t in range(trials):
        kernel = [rng.lognormvariate(math.log(10), 0.05) for _ in range(150)]
        reference = [rng.lognormvariate(math.log(20), 0.05) for _ in range(150)]
        ci = ratio_of_medians(reference, kernel, resamples=500, seed=t)
        covered += ci.low <= 2.0 <= ci.high
    assert covered / trials >= 0.85


def test_a_ratio_needs_samples_and_equal_pairs():
    with pytest.raises(ValueError, match="both sides"):
        ratio_of_medians([], [1.0])
    with pytest.raises(ValueError, match="equal counts"):
        ratio_of_medians([1.0, 2.0], [1.0])


def test_two_runs_compare_through_their_relative_standard_errors():
    tight = stats.ratio_from_medians(110, 0.002, 100, 0.002)
    loose = stats.ratio_from_medians(110, 0.05, 100, 0.05)
    assert tight.point == loose.point == pytest.approx(1.1)
    assert loose.low < tight.low < 1.1 < tight.high < loose.high


def test_the_geometric_mean_of_shapes_narrows_like_one_over_root_k():
    one = Interval(2.0, 2.0 * math.exp(-0.1), 2.0 * math.exp(0.1))
    four = stats.geometric_mean_interval([one] * 4)
    assert four.point == pytest.approx(2.0)
    assert four.log_se == pytest.approx(one.log_se / 2)
    mixed = stats.geometric_mean_interval([Interval(1, 1, 1), Interval(4, 4, 4)])
    assert mixed.point == pytest.approx(2.0)


@pytest.mark.parametrize("low, high, floor, expected", [
    (1.05, 1.10, 0.0, FASTER),
    (1.005, 1.10, 0.01, WITHIN_NOISE),  # clears 1, not 1 + the run-to-run floor
    (1.02, 1.10, 0.01, FASTER),
    (0.90, 0.97, 0.01, SLOWER),
    (0.90, 0.995, 0.01, WITHIN_NOISE),
    (0.95, 1.05, 0.0, WITHIN_NOISE),
])
def test_labels_need_the_whole_interval_beyond_the_noise_floor(low, high, floor, expected):
    assert stats.label(Interval((low + high) / 2, low, high), floor) == expected
