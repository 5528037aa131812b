"""Metrics and plots of ``podium eval``: each expected value is worked out by hand in a comment."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.errors import ConfigError
from podium.eval.metrics import (
    MetricInputError,
    Point,
    aiq,
    apgr,
    cpt,
    cpt_usd,
    hull_quality,
    largest_shortfall,
    mean_ci,
    pareto_front,
    percentile,
    pgr,
    quality_hull,
)

EPS = 1e-12

# --- mean_ci -----------------------------------------------------------------------------------


def test_wilson_interval_for_8_of_10() -> None:
    # z = Φ⁻¹(0.975) = 1.959964, z² = 3.841459, z²/n = 0.3841459, 1 + z²/n = 1.3841459
    # centre = (0.8 + z²/(2n)) / 1.3841459 = (0.8 + 0.1920729) / 1.3841459 = 0.716740
    # half   = z / 1.3841459 · √(0.8·0.2/10 + z²/(4·100)) = 1.416013 · √(0.016 + 0.0096036)
    #        = 1.416013 · 0.160011 = 0.226578
    # → [0.490162, 0.943318] (the textbook Wilson interval for 8/10: 0.4902–0.9433)
    mean, low, high = mean_ci([1] * 8 + [0] * 2)
    assert mean == 0.8
    assert low == pytest.approx(0.490162, abs=1e-6)
    assert high == pytest.approx(0.943318, abs=1e-6)


def test_wilson_is_not_degenerate_at_all_ones() -> None:
    # 1/1: centre = (1 + z²/2)/(1 + z²) = 2.920729/4.841459 = 0.603275,
    # half = z/(1 + z²)·√(z²/4) = 1.959964/4.841459 · 0.979982 = 0.404830 · 0.979982 = 0.396726
    # → [0.206549, 1]
    mean, low, high = mean_ci([1])
    assert mean == 1.0 and high == 1.0
    assert low == pytest.approx(0.206549, abs=1e-6)


def test_normal_interval_for_non_binary_scores() -> None:
    # mean = 0.4; s² = ((−0.2)² + 0² + 0.2²)/(3 − 1) = 0.04, s = 0.2
    # half = 1.959964 · 0.2 / √3 = 0.391993 / 1.732051 = 0.226317 → [0.173683, 0.626317]
    mean, low, high = mean_ci([0.2, 0.4, 0.6])
    assert mean == pytest.approx(0.4)
    assert low == pytest.approx(0.173683, abs=1e-6)
    assert high == pytest.approx(0.626317, abs=1e-6)


def test_normal_interval_is_clipped_to_the_score_range() -> None:
    # mean = 0.55, s = √(((−0.45)² + 0.45²)/1) = 0.636396, half = 1.959964·0.636396/√2 = 0.881963
    # → [0.55 − 0.88, 0.55 + 0.88] = [−0.33, 1.43], clipped to [0, 1]
    mean, low, high = mean_ci([0.1, 1.0])
    assert mean == pytest.approx(0.55) and (low, high) == (0.0, 1.0)


def test_single_non_binary_score_gives_the_whole_range() -> None:
    # no spread can be estimated from one sample: the documented answer is (x, 0, 1)
    assert mean_ci([0.7]) == (0.7, 0.0, 1.0)


@pytest.mark.parametrize(
    ("scores", "confidence"),
    [([], 0.95), ([0.5, 1.2], 0.95), ([float("nan")], 0.95), ([1, 0], 1.0), ([1, 0], 0.0)],
)
def test_mean_ci_rejects_bad_input(scores: list[float], confidence: float) -> None:
    with pytest.raises(ValueError):
        mean_ci(scores, confidence)


def test_metric_errors_are_config_errors_and_value_errors() -> None:
    # the CLI reports PodiumError (ConfigError: "fix your input"); plain callers catch ValueError
    with pytest.raises(ConfigError, match="no scores"):
        mean_ci([])
    assert issubclass(MetricInputError, ValueError)


@settings(deadline=None)  # wall-clock deadlines flake on a loaded machine
@given(
    st.lists(st.integers(0, 100).map(lambda i: i / 100), min_size=1, max_size=40)
    | st.lists(st.sampled_from([0, 1]), min_size=1, max_size=200)
)
def test_interval_contains_the_mean_and_stays_in_range(scores: list[float]) -> None:
    # exact, no tolerance: plot.MethodPoint rejects an interval that misses its mean by an ulp
    mean, low, high = mean_ci(scores)
    assert 0.0 <= low <= mean <= high <= 1.0


@pytest.mark.parametrize("n", [10, 13, 34])
def test_wilson_contains_zero_and_one_rates_exactly(n: int) -> None:
    # unclamped, the closed form lands an ulp outside p̂ = 0 for n = 10, 13, 34 (low 2.8e-17,
    # 1.4e-17, 6.9e-18) and outside p̂ = 1 for n = 13 (high 1 − 1.1e-16)
    assert mean_ci([0] * n)[1] == 0.0
    assert mean_ci([1] * n)[2] == 1.0


# --- percentile --------------------------------------------------------------------------------


def test_percentile_interpolates_linearly() -> None:
    # sorted [1, 2, 3, 10]; p95: h = 0.95·3 = 2.85 → 3 + 0.85·(10 − 3) = 8.95; p50: h = 1.5 → 2.5
    assert percentile([10, 1, 3, 2], 95) == pytest.approx(8.95)
    assert percentile([10, 1, 3, 2], 50) == 2.5
    assert percentile([10, 1, 3, 2], 0) == 1 and percentile([10, 1, 3, 2], 100) == 10
    assert percentile([4.0], 37) == 4.0


@pytest.mark.parametrize(("values", "q"), [([], 50), ([1.0], -1), ([1.0], 100.5), ([1.0, math.inf], 50)])
def test_percentile_rejects_bad_input(values: list[float], q: float) -> None:
    with pytest.raises(ValueError):
        percentile(values, q)


@settings(deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30),
    st.floats(0, 100, allow_nan=False),
)
def test_percentile_matches_numpy_default(values: list[float], q: float) -> None:
    np = pytest.importorskip("numpy")
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12, abs=1e-9)


# --- Pareto front and hull ---------------------------------------------------------------------


def test_pareto_front_drops_dominated_points_and_keeps_duplicates() -> None:
    free = Point(0.0, 0.3, "free")
    b = Point(0.01, 0.5, "b")
    worse_same_cost = Point(0.01, 0.4, "same cost as b, lower quality")
    dearer_same_quality = Point(0.03, 0.5, "same quality as b, dearer")
    dominated = Point(0.02, 0.45, "dearer and worse than b")
    f = Point(0.05, 0.9, "f")
    f_again = Point(0.05, 0.9, "f again")
    front = pareto_front([f, dominated, b, dearer_same_quality, free, worse_same_cost, f_again])
    # each dropped point is dominated by b; exact duplicates don't dominate each other
    assert front == [free, b, f, f_again]
    assert pareto_front([]) == []


def test_hull_drops_points_under_a_chord_and_dearer_worse_points() -> None:
    a = Point(0.01, 0.5, "a")
    under = Point(0.02, 0.6, "under")  # the chord a→c at 0.02 is 0.5 + 0.5·0.4 = 0.7 > 0.6
    c = Point(0.03, 0.9, "c")
    e = Point(0.04, 0.95, "e")  # slope a→c = 20 > slope c→e = 5: concave, kept
    dearer_worse = Point(0.05, 0.8, "dearer_worse")  # costs more than c, scores less: not non-decreasing
    assert quality_hull([dearer_worse, e, under, c, a]) == [a, c, e]


def test_hull_drops_collinear_middle_points_and_duplicates() -> None:
    # (0.02, 0.7) lies on the chord (0.01, 0.5) → (0.03, 0.9): not a vertex; the duplicate of the
    # first point is dropped, the first one in input order stays
    a, a2, mid, c = Point(0.01, 0.5, "a"), Point(0.01, 0.5, "a2"), Point(0.02, 0.7), Point(0.03, 0.9)
    assert quality_hull([a, a2, mid, c]) == [a, c]


def test_hull_of_equal_qualities_is_the_cheapest_point() -> None:
    pts = [Point(0.03, 0.5), Point(0.01, 0.5, "cheap"), Point(0.02, 0.5)]
    assert quality_hull(pts) == [Point(0.01, 0.5, "cheap")]


def test_hull_quality_interpolates_and_steps() -> None:
    hull = [Point(0.01, 0.5), Point(0.03, 0.9)]
    assert hull_quality(hull, 0.02) == pytest.approx(0.7)  # halfway between 0.5 and 0.9
    assert hull_quality(hull, 0.005) == 0.0  # below the cheapest vertex: nothing reachable
    assert hull_quality(hull, 0.01) == 0.5
    assert hull_quality(hull, 1.0) == 0.9  # above the last vertex: its quality
    with pytest.raises(ValueError, match="empty"):
        hull_quality([], 0.0)
    with pytest.raises(ValueError, match="increasing"):
        hull_quality(hull[::-1], 0.0)


def test_point_rejects_negative_cost_and_nan() -> None:
    with pytest.raises(ValueError):
        Point(-0.01, 0.5)
    with pytest.raises(ValueError):
        Point(0.01, float("nan"))


_grid = st.integers(0, 1000).map(lambda i: i / 1000)
_points = st.lists(st.builds(Point, _grid, _grid), min_size=1, max_size=10)


@settings(deadline=None)
@given(_points)
def test_pareto_front_is_exactly_the_non_dominated_points(points: list[Point]) -> None:
    def dominates(p: Point, r: Point) -> bool:
        return p.cost <= r.cost and p.quality >= r.quality and (p.cost, p.quality) != (r.cost, r.quality)

    front = pareto_front(points)
    expected = [r for r in points if not any(dominates(p, r) for p in points)]
    assert sorted(front, key=id) == sorted(expected, key=id)
    assert [p.cost for p in front] == sorted(p.cost for p in front)


@settings(deadline=None)
@given(_points)
def test_hull_is_concave_non_decreasing_and_above_every_point(points: list[Point]) -> None:
    hull = quality_hull(points)
    assert all(any(v is p for p in points) for v in hull)  # vertices are input points
    assert hull[0].cost == min(p.cost for p in points)
    for a, b in itertools.pairwise(hull):
        assert b.cost > a.cost and b.quality > a.quality
    slopes = [(b.quality - a.quality) / (b.cost - a.cost) for a, b in itertools.pairwise(hull)]
    assert all(s2 <= s1 + 1e-9 for s1, s2 in itertools.pairwise(slopes))
    for p in points:
        assert hull_quality(hull, p.cost) >= p.quality - 1e-9


# --- AIQ ---------------------------------------------------------------------------------------

TWO = [Point(0.01, 0.5), Point(0.03, 0.9)]


def test_aiq_of_a_two_point_hull_over_its_own_range() -> None:
    # R̃ rises linearly 0.5 → 0.9 over [0.01, 0.03]: its mean is the midpoint value 0.7
    assert aiq(TWO, 0.01, 0.03) == pytest.approx(0.7, abs=EPS)


def test_aiq_counts_costs_below_the_cheapest_point_as_zero() -> None:
    # [0, 0.01): R̃ = 0; [0.01, 0.03]: mean 0.7 → (0·0.01 + 0.7·0.02) / 0.03 = 0.014/0.03 = 0.4667
    assert aiq(TWO, 0.0, 0.03) == pytest.approx((0 + 0.7 * 0.02) / 0.03, abs=EPS)


def test_aiq_holds_the_last_quality_beyond_the_hull() -> None:
    # [0.01, 0.03]: mean 0.7 (width 0.02); [0.03, 0.05]: 0.9 (width 0.02) → (0.014 + 0.018)/0.04 = 0.8
    assert aiq(TWO, 0.01, 0.05) == pytest.approx(0.8, abs=EPS)


def test_aiq_of_a_single_point() -> None:
    one = [Point(0.01, 0.6)]
    assert aiq(one, 0.01, 0.02) == pytest.approx(0.6, abs=EPS)  # flat at 0.6
    assert aiq(one, 0.0, 0.02) == pytest.approx(0.3, abs=EPS)  # half the range at 0, half at 0.6


def test_aiq_uses_points_outside_the_range() -> None:
    # hull (0, 0.2)→(0.04, 1.0) is R̃ = 0.2 + 20c; its mean over [0.01, 0.03] is R̃(0.02) = 0.6
    assert aiq([Point(0.0, 0.2), Point(0.04, 1.0)], 0.01, 0.03) == pytest.approx(0.6, abs=EPS)


def test_aiq_with_duplicate_costs_keeps_the_better_point() -> None:
    # (0.01, 0.5) is dominated by (0.01, 0.7): hull (0.01, 0.7)→(0.03, 0.9), mean 0.8
    pts = [Point(0.01, 0.5), Point(0.01, 0.7), Point(0.03, 0.9)]
    assert aiq(pts, 0.01, 0.03) == pytest.approx(0.8, abs=EPS)


def test_aiq_rejects_empty_input_and_ranges() -> None:
    with pytest.raises(ValueError, match="no points"):
        aiq([], 0.0, 1.0)
    with pytest.raises(ValueError, match="c_max > c_min"):
        aiq(TWO, 0.03, 0.03)


@settings(deadline=None)
@given(_points, _grid, _grid)
def test_aiq_lies_between_zero_and_the_best_quality(points: list[Point], a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b) + 0.001
    value = aiq(points, lo, hi)
    assert -EPS <= value <= max(p.quality for p in points) + EPS
    if lo >= min(p.cost for p in points):  # the whole range is on the hull: at least its cheapest quality
        assert value >= quality_hull(points)[0].quality - EPS


@settings(deadline=None)
@given(_points)
@pytest.mark.slow
def test_aiq_matches_a_fine_riemann_sum(points: list[Point]) -> None:
    # independent check of the exact integral: 4 000 midpoint samples over [0, 1.2]; the step at
    # the cheapest point costs the sum at most one sample cell (1/4000 of the range): tolerance 1e-3
    n = 4_000
    hull = quality_hull(points)
    riemann = sum(hull_quality(hull, (i + 0.5) * 1.2 / n) for i in range(n)) / n
    assert aiq(points, 0.0, 1.2) == pytest.approx(riemann, abs=1e-3)


# --- PGR, APGR, CPT ----------------------------------------------------------------------------

WEAK, STRONG = Point(0.0, 0.5, "weak"), Point(1.0, 0.9, "strong")
FAST = [WEAK, Point(0.5, 0.9, "router"), STRONG]  # reaches strong quality at half the strong cost


def test_pgr() -> None:
    # (0.8 − 0.5)/(0.9 − 0.5) = 0.75
    assert pgr(0.8, 0.5, 0.9) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="no gap"):
        pgr(0.8, 0.5, 0.5)


def test_apgr_of_the_straight_line_is_one_half() -> None:
    # PGR(x) = x on [0, 1] (random mixing of weak and strong) → ∫ x dx = 0.5
    assert apgr([WEAK, STRONG], weak=WEAK, strong=STRONG) == pytest.approx(0.5, abs=EPS)


def test_apgr_of_a_router_reaching_strong_quality_at_half_cost() -> None:
    # PGR rises 0 → 1 over [0, 0.5] (area 0.25), then stays 1 (area 0.5) → 0.75
    assert apgr(FAST, weak=WEAK, strong=STRONG) == pytest.approx(0.75, abs=EPS)


def test_apgr_penalises_costs_below_the_cheapest_point() -> None:
    # only (0.5, 0.9): R̃ = 0 on [0, 0.5) → PGR = (0 − 0.5)/0.4 = −1.25 (area −0.625);
    # PGR = 1 on [0.5, 1] (area 0.5) → −0.125
    assert apgr([Point(0.5, 0.9)], weak=WEAK, strong=STRONG) == pytest.approx(-0.125, abs=EPS)


def test_apgr_needs_a_dearer_better_strong_model() -> None:
    with pytest.raises(ValueError, match="cost more"):
        apgr(FAST, weak=STRONG, strong=WEAK)
    with pytest.raises(ValueError, match="score higher"):
        apgr(FAST, weak=WEAK, strong=Point(1.0, 0.5))


def test_cpt_solves_on_the_crossing_segment() -> None:
    # CPT(50%): quality 0.5 + 0.5·0.4 = 0.7 on (0, 0.5)→(0.5, 0.9): x = 0.2/0.4 · 0.5 = 0.25
    # CPT(80%): quality 0.82: x = 0.32/0.4 · 0.5 = 0.4
    assert cpt(FAST, weak=WEAK, strong=STRONG, target=0.5) == pytest.approx(0.25, abs=EPS)
    assert cpt(FAST, weak=WEAK, strong=STRONG, target=0.8) == pytest.approx(0.4, abs=EPS)
    assert cpt(FAST, weak=WEAK, strong=STRONG, target=0.0) == 0.0  # the weak model itself


def test_cpt_is_none_when_never_reached() -> None:
    # PGR 1.1 needs quality 0.94 > 0.9, the best point
    assert cpt(FAST, weak=WEAK, strong=STRONG, target=1.1) is None
    # (0, 0.5)→(2, 0.9): PGR 1 only at x = 2 > 1; PGR 0.25 (quality 0.6) at c = 0.1/0.4·2 = 0.5
    slow = [WEAK, Point(2.0, 0.9)]
    assert cpt(slow, weak=WEAK, strong=STRONG, target=1.0) is None
    assert cpt(slow, weak=WEAK, strong=STRONG, target=0.25) == pytest.approx(0.5, abs=EPS)


def test_cpt_at_the_step_onto_the_cheapest_point() -> None:
    # only (0.3, 0.9): below x = 0.3 nothing is reachable (PGR < 0), at 0.3 PGR = 1
    assert cpt([Point(0.3, 0.9)], weak=WEAK, strong=STRONG, target=0.5) == pytest.approx(0.3)


def test_cpt_usd_converts_normalised_cost() -> None:
    # weak $0.001, strong $0.011 (span $0.01); router at $0.006 reaches strong quality, so CPT(50%)
    # is x = 0.25 as above → $0.001 + 0.25·$0.01 = $0.0035
    weak, strong = Point(0.001, 0.5), Point(0.011, 0.9)
    pts = [weak, Point(0.006, 0.9), strong]
    assert cpt(pts, weak=weak, strong=strong, target=0.5) == pytest.approx(0.25, abs=1e-9)
    assert cpt_usd(pts, weak=weak, strong=strong, target=0.5) == pytest.approx(0.0035, abs=EPS)
    assert cpt_usd(pts, weak=weak, strong=strong, target=2.0) is None


@settings(deadline=None)
@given(_points, st.floats(-0.5, 1.5, allow_nan=False))
def test_cpt_is_the_first_cost_reaching_the_target(points: list[Point], target: float) -> None:
    weak, strong = Point(0.1, 0.3), Point(0.8, 0.7)
    hull = quality_hull(points)

    def pgr_at(c: float) -> float:
        return pgr(hull_quality(hull, c), 0.3, 0.7)

    c = cpt_usd(points, weak=weak, strong=strong, target=target)
    x = cpt(points, weak=weak, strong=strong, target=target)
    if c is None:
        assert x is None
        assert pgr_at(0.8) < target
    else:
        assert x is not None and x == pytest.approx((c - 0.1) / 0.7, abs=EPS)
        assert 0.1 <= c <= 0.8 and 0.0 <= x <= 1.0
        assert pgr_at(c) >= target - 1e-9
        if c > 0.1 + 1e-6:
            assert pgr_at(c - 1e-6) < target


# --- plot --------------------------------------------------------------------------------------

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_pareto_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from podium.eval.plot import MethodPoint, pareto_plot

    methods = [
        MethodPoint("small", 0.0004, 0.55, 0.45, 0.65),
        MethodPoint("large", 0.012, 0.85, 0.78, 0.91),
        MethodPoint("dominated", 0.02, 0.7, 0.6, 0.8),
    ]
    sweep = [Point(0.001, 0.6, "λ=1"), Point(0.004, 0.75, "λ=0.3"), Point(0.009, 0.84, "λ=0")]
    out = pareto_plot(tmp_path / "sub" / "pareto.png", methods, curves={"router": sweep}, title="GSM8K")
    assert out == tmp_path / "sub" / "pareto.png"
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 1000


def test_pareto_plot_with_a_zero_cost_method(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from podium.eval.plot import MethodPoint, pareto_plot

    methods = [MethodPoint("local", 0.0, 0.4, 0.3, 0.5), MethodPoint("api", 0.01, 0.8, 0.7, 0.9)]
    out = pareto_plot(tmp_path / "zero.png", methods)
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_cost_axis_scale_choice() -> None:
    from podium.eval.plot import _cost_scale

    assert _cost_scale([0.001, 0.01], log_cost=True) == ("log", {})
    # a free method cannot sit on a log axis: symlog, linear up to the cheapest paid method
    assert _cost_scale([0.0, 0.002, 0.01], log_cost=True) == ("symlog", {"linthresh": 0.002})
    assert _cost_scale([0.0, 0.0], log_cost=True) == ("linear", {})
    assert _cost_scale([0.001, 0.01], log_cost=False) == ("linear", {})


def test_plot_inputs_are_checked(tmp_path: Path) -> None:
    from podium.eval.plot import MethodPoint, pareto_plot

    with pytest.raises(ValueError, match="quality_low"):
        MethodPoint("bad", 0.01, 0.9, 0.95, 1.0)
    with pytest.raises(ValueError, match="nothing to plot"):
        pareto_plot(tmp_path / "empty.png", [], curves={"router": []})


def test_importing_the_plot_module_does_not_import_matplotlib() -> None:
    code = "import sys, podium, podium.eval.plot; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_methods_at_the_same_point_share_one_label() -> None:
    # live MBPP: the default conductor sent every question to the 1.5B worker, so both methods
    # sit at the same cost and quality; two labels there printed over each other
    from podium.eval.plot import MethodPoint, _annotations

    methods = [
        MethodPoint("conductor", 0.000147, 0.467, 0.302, 0.639),
        MethodPoint("single:1.5b", 0.000147, 0.467, 0.302, 0.639),
        MethodPoint("single:0.5b", 0.000091, 0.300, 0.167, 0.479),
    ]
    assert _annotations(methods) == {
        (0.000147, 0.467): "conductor = single:1.5b",
        (0.000091, 0.300): "single:0.5b",
    }


def test_a_crowded_plot_has_one_legend_entry_per_family_and_labels_only_its_front() -> None:
    from matplotlib.colors import to_hex

    from podium.eval.metrics import Point
    from podium.eval.plot import MethodPoint, _pareto_figure

    methods = [MethodPoint(f"single:w{i}", 0.001 * (i + 1), 0.1 + 0.01 * i, 0.05, 0.5) for i in range(10)]
    methods += [MethodPoint(f"plan:p{i}", 0.002 * (i + 1), 0.3 - 0.02 * i, 0.1, 0.6) for i in range(6)]
    methods += [MethodPoint("light:mine@v3", 0.004, 0.35, 0.2, 0.5), MethodPoint("oracle", 0.003, 0.9, 0.8, 1.0)]
    methods += [MethodPoint(f"light:cl-s{k}@v1", 0.005, 0.3, 0.2, 0.4) for k in range(3)]  # three seeds
    router = [Point(0.001, 0.2), Point(0.003, 0.3)]
    fig = _pareto_figure(methods, curves={"router": router}, title="", log_cost=True, front=None)
    ax = fig.axes[0]
    handles, legend = ax.get_legend_handles_labels()
    families = ["single", "plan", "light:mine", "oracle", "light:cl"]
    assert sorted(legend) == sorted([*families, "router", "Pareto front (methods)"])
    colors = [to_hex(h.get_color() if hasattr(h, "get_color") else h[0].get_color()) for h in handles]
    assert len(set(colors)) == len(colors)  # no family shares the router line's colour, or another's
    from podium.eval.plot import _annotations

    assert _annotations(methods)[(0.005, 0.3)] == "light:cl ×3"  # three seeds at one point: one short label
    assert _annotations([*methods[:1], MethodPoint("plan:x", 0.001, 0.1, 0, 1)])[(0.001, 0.1)] == "single:w0 = plan:x"
    texts = {t.get_text() for t in ax.texts}
    # the front by cost: single:w0 ($0.001, 0.10), plan:p0 ($0.002, 0.30), oracle ($0.003, 0.90)
    assert texts == {"single:w0", "plan:p0", "oracle"}


def test_largest_shortfall_of_crossing_curves_both_ways() -> None:
    # weak (1, 0.5) and strong (5, 0.9) are on both hulls. A is higher at cost 2 (0.8 against the
    # chord's 0.6 on B's side), B higher at cost 4 (0.88 against A's chord 0.8 + (0.9 − 0.8)·2/3).
    weak, strong = Point(1.0, 0.5), Point(5.0, 0.9)
    a, b = [Point(2.0, 0.8)], [Point(4.0, 0.88)]
    gap, at = largest_shortfall(a, b, weak=weak, strong=strong)
    b_at_2 = 0.5 + (0.88 - 0.5) / 3  # B's hull between weak and its point
    assert at == 2.0 and gap == pytest.approx(0.8 - b_at_2)
    gap, at = largest_shortfall(b, a, weak=weak, strong=strong)
    assert at == 4.0 and gap == pytest.approx(0.88 - (0.8 + 0.1 * 2 / 3))


def test_largest_shortfall_of_a_dominating_curve_is_its_margin() -> None:
    weak, strong = Point(1.0, 0.5), Point(5.0, 0.9)
    # the candidate is 0.05 higher at cost 3 and equal at weak and strong: never below, margin 0
    assert largest_shortfall([Point(3.0, 0.7)], [Point(3.0, 0.75)], weak=weak, strong=strong)[0] == 0.0
    gap, at = largest_shortfall([Point(3.0, 0.75)], [Point(3.0, 0.7)], weak=weak, strong=strong)
    assert (gap, at) == (pytest.approx(0.05), 3.0)
    assert largest_shortfall([], [], weak=weak, strong=strong)[0] == 0.0
    with pytest.raises(MetricInputError, match="largest_shortfall"):
        largest_shortfall([], [], weak=strong, strong=weak)
