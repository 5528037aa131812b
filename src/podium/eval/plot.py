"""Cost–quality plots of ``podium eval`` (PNG, matplotlib's Agg renderer).

matplotlib is imported inside :func:`pareto_plot`, so importing this module (or ``podium``)
stays light and works without it; calling the function without matplotlib installed raises
ImportError naming the extra. Figures are drawn on an Agg canvas directly, never through
``pyplot``: no display is needed and the process's global backend is left alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.eval.metrics import MetricInputError, Point, pareto_front
from podium.extras import install_command

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation

__all__ = ["MethodPoint", "learning_curve_plot", "pareto_plot"]

_DPI = 150


@dataclass(frozen=True)
class MethodPoint:
    """One evaluated method with its quality's confidence interval (see :func:`~podium.eval.metrics.mean_ci`).

    Raises MetricInputError when a value is not finite, cost is negative, or the interval does
    not contain ``quality``.
    """

    label: str
    """Name shown next to the marker and in the legend."""
    cost: float
    """Mean cost per request, US dollars (≥ 0)."""
    quality: float
    """Mean score."""
    quality_low: float
    """Lower end of the 95 % interval of the mean score."""
    quality_high: float
    """Upper end of the 95 % interval of the mean score."""

    def __post_init__(self) -> None:
        values = (self.cost, self.quality, self.quality_low, self.quality_high)
        if not all(math.isfinite(v) for v in values):
            raise MetricInputError(f"MethodPoint {self.label!r}: values must be finite, got {self!r}")
        if self.cost < 0:
            raise MetricInputError(f"MethodPoint {self.label!r}: cost is USD per request and cannot be negative")
        if not self.quality_low <= self.quality <= self.quality_high:
            raise MetricInputError(
                f"MethodPoint {self.label!r}: need quality_low ≤ quality ≤ quality_high, got "
                f"{self.quality_low} ≤ {self.quality} ≤ {self.quality_high}"
            )


_CROWDED = 12
"""More methods than this: one legend entry and colour per family, point labels on the front only."""


def pareto_plot(
    path: Path | str,
    methods: Sequence[MethodPoint],
    *,
    curves: Mapping[str, Sequence[Point]] | None = None,
    title: str = "",
    log_cost: bool = True,
    front: Sequence[Point] | None = None,
) -> Path:
    """Draw methods and curves on the cost–quality plane and save a PNG (150 dpi) at ``path``.

    * each method: a marker with its confidence interval as a vertical error bar, and its label;
    * each curve (e.g. a router's λ sweep, name → points): a line with markers, in cost order;
    * the Pareto front (:func:`~podium.eval.metrics.pareto_front`) of ``front`` (default: the
      methods): a dashed step line — the best quality any of them gives for at most that cost.

    x: "mean cost per request (USD)"; y: "quality (mean score)". With ``log_cost`` the x axis is
    logarithmic when every cost is > 0; when some cost is 0 (a free local model) it is *symlog*:
    linear from 0 to the smallest positive cost, logarithmic above, so the zero-cost method is
    drawn at 0 and the others keep their log spacing. If every cost is 0, or ``log_cost`` is
    False, the axis is linear. Parent folders are created. Returns ``path`` as a Path.

    Raises MetricInputError when there is nothing to plot; ImportError when matplotlib is missing.
    """
    fig = _pareto_figure(methods, curves=curves or {}, title=title, log_cost=log_cost, front=front)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=_DPI, format="png")
    return out


def _pareto_figure(
    methods: Sequence[MethodPoint],
    *,
    curves: Mapping[str, Sequence[Point]],
    title: str,
    log_cost: bool,
    front: Sequence[Point] | None,
) -> Figure:
    """The laid-out figure of :func:`pareto_plot` (an Agg canvas, not saved)."""
    if not methods and not any(curves.values()):
        raise MetricInputError("pareto_plot: nothing to plot — pass at least one method or a non-empty curve")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"pareto_plot needs matplotlib: {install_command('eval')}") from exc

    fig = Figure(figsize=(9.5, 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()

    for name, points in curves.items():
        ordered = sorted(points, key=lambda p: p.cost)
        if ordered:
            ax.plot([p.cost for p in ordered], [p.quality for p in ordered], marker=".", linewidth=1.2, label=name)

    best = pareto_front(list(front) if front is not None else [Point(m.cost, m.quality, m.label) for m in methods])
    crowded = len(methods) > _CROWDED
    families: dict[str, str] = {}  # crowded: one colour and legend entry per family (``single``, ``plan``…)
    for m in methods:
        color, label = None, m.label or None
        if crowded:
            family = _family(m.label)
            label = None if family in families else family  # the family's first method carries its entry
            # colours after the curves' (the router's line is C0): no family shares a curve's colour
            color = families.setdefault(family, f"C{(len(curves) + len(families)) % 10}")
        ax.errorbar(
            [m.cost],
            [m.quality],
            yerr=[[m.quality - m.quality_low], [m.quality_high - m.quality]],
            fmt="o",
            capsize=3,
            color=color,
            alpha=0.55 if crowded else 1.0,
            label=label,
        )
    # crowded: labels only on the Pareto front and the oracle (the others are in eval.md)
    shown = {p.label for p in best} | {"oracle"} if crowded else None
    labels = [
        ax.annotate(text, (cost, quality), xytext=(4, 4), textcoords="offset points", fontsize=8)
        for (cost, quality), text in _annotations(methods, shown).items()
    ]

    if len(best) >= 2:
        ax.step(
            [p.cost for p in best],
            [p.quality for p in best],
            where="post",
            linestyle="--",
            color="grey",
            linewidth=1.0,
            label="Pareto front (methods)",
        )

    costs = [m.cost for m in methods] + [p.cost for pts in curves.values() for p in pts]
    _set_cost_scale(ax, costs, log_cost)
    ax.set_xlabel("mean cost per request (USD)")
    ax.set_ylabel("quality (mean score)")
    if title:
        ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: never over a point
    _keep_inside(fig, ax, labels)
    return fig


def _keep_inside(fig: Figure, ax: Axes, labels: Sequence[Annotation]) -> None:
    """Keep the point labels inside the axes, so none runs into the legend beside them: a label
    that would cross the right edge goes to the left of its point instead, and one still too
    wide (a long merged "a = b" label) breaks after each "=". Measured on the laid-out figure."""
    fig.canvas.draw()  # constrained layout has placed the axes: extents are final
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    box = ax.get_window_extent(renderer)
    for label in labels:
        if label.get_window_extent(renderer).x1 <= box.x1:
            continue
        label.set_horizontalalignment("right")
        label.xyann = (-4, 4)
        extent = label.get_window_extent(renderer)
        if extent.x0 < box.x0 or extent.x1 > box.x1:
            label.set_text(label.get_text().replace(" = ", " =\n"))
    fig.canvas.draw()  # the layout again, with the labels where they now are


def _family(label: str) -> str:
    """A method's family for a crowded plot's legend: ``single:x`` → ``single``, ``router(λ=1)``
    → ``router``, ``light:NAME@v2`` → ``light:NAME``, and seeds of one training together:
    ``light:NAME-s2@v1`` → ``light:NAME``."""
    head = label.split("(", 1)[0]
    if head.startswith(("light:", "lm:")):
        return re.sub(r"-s\d+$", "", head.rsplit("@", 1)[0])
    return head.split(":", 1)[0]


def _annotations(methods: Sequence[MethodPoint], shown: set[str] | None = None) -> dict[tuple[float, float], str]:
    """One label per drawn point: methods at the same (cost, quality) — e.g. a conductor that
    sends everything to one worker, beside that worker alone — share one "a = b" label instead
    of printing over each other; several seeds of one trained conductor there share one
    "light:NAME ×3" label. ``shown``: label only these methods (None: all)."""
    labels: dict[tuple[float, float], list[str]] = {}
    for m in methods:
        if m.label and (shown is None or m.label in shown):
            labels.setdefault((m.cost, m.quality), []).append(m.label)
    return {point: _merged(names) for point, names in labels.items()}


def _merged(names: Sequence[str]) -> str:
    families = {_family(n) for n in names}
    if len(names) > 1 and len(families) == 1 and names[0].startswith(("light:", "lm:")):
        return f"{families.pop()} ×{len(names)}"
    return " = ".join(names)


def _cost_scale(costs: Sequence[float], log_cost: bool) -> tuple[str, dict[str, Any]]:
    """The x scale and its keyword arguments: see :func:`pareto_plot`."""
    positive = [c for c in costs if c > 0]
    if not log_cost or not positive:
        return "linear", {}
    if len(positive) == len(costs):
        return "log", {}
    return "symlog", {"linthresh": min(positive)}


def _set_cost_scale(ax: Axes, costs: Sequence[float], log_cost: bool) -> None:
    scale, kwargs = _cost_scale(costs, log_cost)
    ax.set_xscale(scale, **kwargs)
    if scale == "log":  # labels at 1, 2, 5 × 10ⁿ as plain numbers; unlabelled minor ticks
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    if scale == "symlog":  # keep the free method off the spine without showing negative costs' decades
        ax.set_xlim(left=-0.2 * kwargs["linthresh"])


def learning_curve_plot(
    path: Path | str, x: Sequence[float], series: Mapping[str, Sequence[float]], *, xlabel: str, title: str = ""
) -> Path:
    """Training curves: each named series against ``x`` (e.g. reward per generation), as a PNG
    (150 dpi) at ``path``. Raises MetricInputError when a series' length differs from ``x``."""
    for name, ys in series.items():
        if len(ys) != len(x):
            raise MetricInputError(f"learning_curve_plot: series {name!r} has {len(ys)} values for {len(x)} x values")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name, ys in series.items():
        ax.plot(list(x), list(ys), linewidth=1.2, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("reward (mean over questions)")
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=_DPI, format="png")
    return out
