"""Charts, drawn server-side with matplotlib as SVG (readable without JavaScript), each with its
95% intervals drawn and a text alternative.

Every function returns a :class:`Chart`: its title, the ``alt`` text the page puts on the
``<img>`` (cheap, computed at once) and :meth:`Chart.render` for the SVG (with a ``<title>``).
Rendered SVGs are cached by :class:`ChartCache`: a result is immutable once published, so a chart
keyed by the results it shows never has to be drawn twice.

Rendering uses matplotlib's object API (no pyplot, no global figure state) under one lock,
since rcParams are process-global.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any

from cachetools import LRUCache

from liberopro.report.palette import CHART, HEATMAP_CMAP, SERIES, text_on
from liberopro.schema.public import CATEGORIES, CaseRate, PairedDifference, Rate

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

_RENDER_LOCK = threading.Lock()

_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",  # text stays text: selectable, searchable, small
    "svg.hashsalt": "liberopro-leaderboard",  # deterministic ids: the same chart gives the same bytes
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "text.color": CHART["text"],
    "axes.edgecolor": CHART["axis"],
    "axes.labelcolor": CHART["text"],
    "xtick.color": CHART["axis"],
    "ytick.color": CHART["axis"],
    "xtick.labelcolor": CHART["text"],
    "ytick.labelcolor": CHART["text"],
    "hatch.color": "#ffffff",
    "hatch.linewidth": 1.2,
    "legend.frameon": False,
}


@dataclass(frozen=True)
class Chart:
    """A chart before drawing: ``alt`` is its text alternative, :meth:`render` draws the SVG."""

    title: str
    alt: str
    draw: Callable[[object], None]
    size: tuple[float, float]

    def render(self) -> bytes:
        return _render(self.draw, self.title, self.size)


def etag(svg: bytes) -> str:
    """A strong HTTP entity tag for SVG bytes."""
    return '"' + hashlib.sha256(svg).hexdigest()[:32] + '"'


def pct(v: float | None, digits: int = 0) -> str:
    return "n/a" if v is None else f"{100 * v:.{digits}f}%"


def rate_text(r: Rate | None) -> str:
    """``62% [55%, 69%], 400 episodes`` (for text alternatives)."""
    if r is None or r.value is None:
        return "not run"
    ci = f" [{pct(r.ci95[0])}, {pct(r.ci95[1])}]" if r.ci95 else ""
    return f"{pct(r.value)}{ci}, {r.episodes} episodes"


def _render(draw: Callable[[object], None], title: str, size: tuple[float, float]) -> bytes:
    import matplotlib
    from matplotlib.figure import Figure

    with _RENDER_LOCK, matplotlib.rc_context(_RC):
        fig = Figure(figsize=size, layout="constrained")
        draw(fig)
        buf = io.BytesIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue().decode()
    # An accessible name for the SVG when opened on its own (on a page the <img alt> serves).
    start = svg.index("<svg")
    end = svg.index(">", start) + 1
    svg = svg[:end] + f"\n <title>{escape(title)}</title>" + svg[end:]
    return svg.encode()


def _xerr(rates: Sequence[Rate | None]) -> list[list[float]]:
    lo, hi = [], []
    for r in rates:
        if r is None or r.value is None or r.ci95 is None:
            lo.append(0.0)
            hi.append(0.0)
        else:
            lo.append(max(0.0, 100 * (r.value - r.ci95[0])))
            hi.append(max(0.0, 100 * (r.ci95[1] - r.value)))
    return [lo, hi]


def _values(rates: Sequence[Rate | None]) -> list[float]:
    return [0.0 if r is None or r.value is None else 100 * r.value for r in rates]


def _percent_axis(ax, axis: str = "x") -> None:
    getattr(ax, f"set_{axis}lim")(0, 100)
    ticks = [0, 20, 40, 60, 80, 100]
    getattr(ax, f"set_{axis}ticks")(ticks, [f"{t}%" for t in ticks])
    ax.grid(axis=axis, color=CHART["grid"], linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _grouped_bars(
    ax, series: list[tuple[str, list[Rate | None], str, str]], labels: list[str], nominal: Rate | None = None
) -> None:
    """Horizontal grouped bars with interval whiskers; ``series`` = (name, rates, colour, hatch)."""
    n = len(series)
    height = 0.8 / n
    ys = list(range(len(labels)))
    for i, (name, rates, colour, hatch) in enumerate(series):
        pos = [y - 0.4 + height * (i + 0.5) for y in ys]
        ax.barh(
            pos,
            _values(rates),
            height=height * 0.92,
            color=colour,
            hatch=hatch,
            edgecolor=colour,
            linewidth=0,
            label=name,
        )
        ax.errorbar(
            _values(rates), pos, xerr=_xerr(rates), fmt="none", ecolor=CHART["interval"], elinewidth=1.1, capsize=2.5
        )
        for p, r in zip(pos, rates, strict=True):
            if r is None or r.value is None:
                ax.text(1.5, p, "not run", va="center", ha="left", fontsize=8, color=CHART["text"])
    if nominal is not None and nominal.value is not None:
        ax.axvline(
            100 * nominal.value,
            color=CHART["nominal"],
            linestyle=(0, (4, 3)),
            linewidth=1.2,
            label=f"nominal ({pct(nominal.value)})",
        )
    ax.set_yticks(ys, labels)
    if not ax.yaxis_inverted():  # axes sharing y share the inversion: invert once
        ax.invert_yaxis()
    _percent_axis(ax)


def category_chart(metrics: dict[str, Rate]) -> Chart:
    """Per category: the static and the runtime mean success rate with intervals, and the nominal line."""
    static = [metrics.get(f"static.{c}") for c in CATEGORIES]
    runtime = [metrics.get(f"runtime.{c}") for c in CATEGORIES]
    nominal = metrics.get("nominal")

    def draw(fig) -> None:
        ax = fig.subplots()
        _grouped_bars(
            ax,
            [("static", static, CHART["static"], ""), ("runtime", runtime, CHART["runtime"], "///")],
            list(CATEGORIES),
            nominal,
        )
        ax.set_xlabel("success rate (bars: mean over the category's cases; whiskers: 95% interval)")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3)

    title = "Success rate per category, static and runtime, with 95% intervals"
    alt = f"{title}. Nominal: {rate_text(nominal)}. " + " ".join(
        f"{c}: static {rate_text(s)}; runtime {rate_text(r)}."
        for c, s, r in zip(CATEGORIES, static, runtime, strict=True)
    )
    return Chart(title, alt, draw, (7.5, 4.6))


def shift_chart(cases: list[CaseRate], nominal: Rate | None) -> Chart:
    """Per single shift, static and runtime side by side: success rate and 95% interval."""
    from liberopro.schema.public import shift_sort_key

    singles = sorted(
        (c for c in cases if c.standard and len(c.shift_ids) == 1), key=lambda c: shift_sort_key(c.shift_ids[0])
    )
    groups = [
        ("static", [c for c in singles if c.kind == "static"]),
        ("runtime", [c for c in singles if c.kind == "runtime"]),
    ]
    rows = max(1, max(len(g) for _, g in groups))

    def draw(fig) -> None:
        axes = fig.subplots(1, 2, sharex=True)
        for ax, (kind, group) in zip(axes, groups, strict=True):
            ys = list(range(len(group)))
            rates = [c.rate for c in group]
            ax.errorbar(
                _values(rates),
                ys,
                xerr=_xerr(rates),
                fmt="o",
                color=CHART[kind],
                markersize=4.5,
                ecolor=CHART[kind],
                elinewidth=1.4,
                capsize=2,
            )
            if nominal is not None and nominal.value is not None:
                ax.axvline(100 * nominal.value, color=CHART["nominal"], linestyle=(0, (4, 3)), linewidth=1.1)
            ax.set_yticks(ys, [f"{c.shift_ids[0]} {c.shift_names[0]}" for c in group], fontsize=8.5)
            ax.set_ylim(rows - 0.5, -0.5)
            ax.set_title(f"{kind} shifts ({len(group)})", fontsize=10, loc="left")
            _percent_axis(ax)
            if not group:
                ax.text(50, 0, "none run", ha="center", va="center")
        fig.supxlabel("success rate per shift (dot) with 95% Wilson interval; dashed: nominal", fontsize=9)

    title = "Success rate per shift with 95% intervals"
    alt = f"{title}. Nominal: {rate_text(nominal)}. " + " ".join(
        f"{c.case} {c.shift_names[0]}: {rate_text(c.rate)}." for _, g in groups for c in g
    )
    return Chart(title, alt, draw, (11.5, 1.2 + 0.24 * rows))


def _label_positions(points: list[tuple[str, Rate, Rate]]) -> list:
    """Label places for scatter points (data units, percent). Each label takes the first of a
    list of places around its point whose box overlaps no point, whisker or label already placed
    (box sizes estimated for 8 pt text on the chart's axes)."""
    char_w, height = 1.55, 3.4

    def boxes_of(x: float, y: float, s: Rate, r: Rate) -> list[tuple[float, float, float, float]]:
        out = [(x - 2, x + 2, y - 2, y + 2)]
        if s.ci95:
            out.append((100 * s.ci95[0], 100 * s.ci95[1], y - 0.6, y + 0.6))
        if r.ci95:
            out.append((x - 0.6, x + 0.6, 100 * r.ci95[0], 100 * r.ci95[1]))
        return out

    def overlaps(a, b) -> bool:
        return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]

    obstacles = [b for _, s, r in points for b in boxes_of(100 * s.value, 100 * r.value, s, r)]  # type: ignore[operator]
    candidates = [
        (d * sx, dy) for d, dy0 in ((3.5, 3.5), (3.5, 9), (6, 15), (6, 21)) for dy in (dy0, -dy0) for sx in (1, -1)
    ]
    out = []
    for label, s, r in points:
        x, y = 100 * s.value, 100 * r.value  # type: ignore[operator]
        width = char_w * len(label)
        choice = None
        for dx, dy in candidates:
            lx, ly = x + dx, y + dy
            box = (
                (lx, lx + width, ly - height / 2, ly + height / 2)
                if dx > 0
                else (lx - width, lx, ly - height / 2, ly + height / 2)
            )
            if box[0] < 0 or box[1] > 100 or box[2] < 0 or box[3] > 100:
                continue
            if not any(overlaps(box, o) for o in obstacles):
                choice = (lx, ly, "left" if dx > 0 else "right", box)
                break
        if choice is None:
            lx, ly = x + 3.5, y + 3.5
            choice = (lx, ly, "left", (lx, lx + width, ly - height / 2, ly + height / 2))
        obstacles.append(choice[3])
        out.append((label, (x, y), (choice[0], choice[1]), choice[2]))
    return out


def static_runtime_chart(points: list[tuple[str, Rate, Rate]], subject: str = "submission") -> Chart:
    """Each ``subject`` (a submission, a policy) at (static mean, runtime mean) with both intervals;
    the diagonal marks equal means."""
    shown = [(label, s, r) for label, s, r in points if s.value is not None and r.value is not None]

    def draw(fig) -> None:
        ax = fig.subplots()
        ax.plot(
            [0, 100],
            [0, 100],
            color=CHART["axis"],
            linestyle=(0, (4, 3)),
            linewidth=1,
            label="runtime mean = static mean",
        )
        if shown:
            ax.errorbar(
                _values([s for _, s, _ in shown]),
                _values([r for _, _, r in shown]),
                xerr=_xerr([s for _, s, _ in shown]),
                yerr=_xerr([r for _, _, r in shown]),
                fmt="o",
                color=CHART["static"],
                ecolor=CHART["interval"],
                elinewidth=1,
                capsize=2,
                markersize=5,
                label=f"{subject} (whiskers: 95% intervals)",
            )
            for label, (x, y), (lx, ly), ha in _label_positions(shown[:12]):
                ax.annotate(
                    label,
                    (x, y),
                    xytext=(lx, ly),
                    textcoords="data",
                    fontsize=8,
                    va="center",
                    ha=ha,
                    arrowprops={"arrowstyle": "-", "color": CHART["axis"], "lw": 0.6},
                )
        else:
            ax.text(50, 50, f"no {subject} with both means", ha="center", va="center")
        _percent_axis(ax, "x")
        _percent_axis(ax, "y")
        ax.set_aspect("equal")
        ax.set_xlabel("static mean success rate")
        ax.set_ylabel("runtime mean success rate")
        ax.legend(loc="upper left", fontsize=8)

    title = f"Static versus runtime mean success rate per {subject}, with 95% intervals"
    alt = f"{title}. Points below the diagonal do worse under runtime shifts than under static ones. " + " ".join(
        f"{label}: static {rate_text(s)}; runtime {rate_text(r)}." for label, s, r in points
    )
    return Chart(title, alt, draw, (5.6, 5.4))


def heatmap_chart(
    rows: list[tuple[str, dict[str, Rate]]],
    static_ids: list[str],
    runtime_ids: list[str],
    names: dict[str, str],
    subject: str = "submission",
) -> Chart:
    """Success rate per shift (columns) and submission (rows), static and runtime panels; the
    number in each cell is the rate in percent, a blank grey cell a shift not run."""
    import numpy as np

    def draw(fig) -> None:
        from matplotlib import colormaps

        cmap = colormaps[HEATMAP_CMAP]
        panels = [(k, ids) for k, ids in (("static", static_ids), ("runtime", runtime_ids)) if ids]
        if not panels or not rows:
            ax = fig.subplots()
            ax.axis("off")
            ax.text(0.5, 0.5, "no per-shift results to show", ha="center", va="center")
            return
        axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
        image = None
        for ax, (kind, ids) in zip(axes, panels, strict=True):
            data = np.full((len(rows), len(ids)), np.nan)
            for i, (_, rates) in enumerate(rows):
                for j, sid in enumerate(ids):
                    r = rates.get(sid)
                    if r is not None and r.value is not None:
                        data[i, j] = r.value
            masked = np.ma.masked_invalid(data)
            cm = cmap.with_extremes(bad=CHART["missing"])
            image = ax.imshow(masked, cmap=cm, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
            for i in range(len(rows)):
                for j in range(len(ids)):
                    v = data[i, j]
                    if np.isnan(v):
                        continue
                    ax.text(
                        j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=7.5, color=text_on(cmap(float(v)))
                    )
            ax.set_xticks(range(len(ids)), ids, fontsize=8, rotation=90)
            ax.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=8.5)
            ax.tick_params(length=0)
            for spine in ax.spines.values():
                spine.set_visible(False)
            ax.set_title(f"{kind} shifts", fontsize=10, loc="left")
        if image is not None:
            bar = fig.colorbar(image, ax=list(axes), shrink=0.8, pad=0.01)
            bar.set_ticks([0, 0.25, 0.5, 0.75, 1.0], labels=["0%", "25%", "50%", "75%", "100%"])
            bar.set_label("success rate")

    title = f"Success rate per shift and {subject} (heatmap)"
    lines = []
    for label, rates in rows:
        run = [(sid, r.value) for sid, r in rates.items() if r.value is not None and sid != "nominal"]
        if run:
            worst = min(run, key=lambda x: x[1])
            best = max(run, key=lambda x: x[1])
            lines.append(
                f"{label}: {len(run)} shifts run, lowest {worst[0]} {names.get(worst[0], '')} "
                f"({pct(worst[1])}), highest {best[0]} {names.get(best[0], '')} ({pct(best[1])})."
            )
    alt = (
        f"{title}: {len(rows)} {subject}s by {len(static_ids)} static and {len(runtime_ids)} runtime shifts. "
        + " ".join(lines)
        + " Every number is in the data table that follows the chart."
    )
    width = 2.4 + 0.3 * max(len(static_ids), len(runtime_ids), 1)
    panels = (1 if static_ids else 0) + (1 if runtime_ids else 0)
    height = 0.9 + max(panels, 1) * (0.75 + 0.3 * max(len(rows), 1))
    return Chart(title, alt, draw, (max(width, 7.0), height))


def series_style(i: int) -> tuple[str, str]:
    """Colour and hatch of the i-th series of a chart (:data:`~liberopro.report.palette.SERIES`)."""
    key, hatch = SERIES[i % len(SERIES)]
    return CHART[key], hatch


def categories_chart(series: Sequence[tuple[str, dict[str, Rate]]], title: str | None = None) -> Chart:
    """Several runs' category means side by side (static and runtime panels), with intervals;
    ``series`` = (label, ranking metrics keyed ``static.<Category>`` / ``runtime.<Category>``)."""
    labels = [label for label, _ in series]

    def draw(fig) -> None:
        axes = fig.subplots(1, 2, sharey=True)
        for ax, kind in zip(axes, ("static", "runtime"), strict=True):
            bars = [
                (label, [m.get(f"{kind}.{c}") for c in CATEGORIES], *series_style(i))
                for i, (label, m) in enumerate(series)
            ]
            _grouped_bars(ax, bars, list(CATEGORIES))
            ax.set_title(f"{kind} categories", fontsize=10, loc="left")
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles, names, loc="outside upper center", ncols=min(len(series), 4))
        fig.supxlabel("mean success rate over the category's cases; whiskers: 95% interval", fontsize=9)

    title = title or f"Category success rates: {', '.join(labels)}, with 95% intervals"
    alt = f"{title}. " + " ".join(
        f"{kind} {c}: " + "; ".join(f"{label} {rate_text(m.get(f'{kind}.{c}'))}" for label, m in series) + "."
        for kind in ("static", "runtime")
        for c in CATEGORIES
    )
    return Chart(title, alt, draw, (10.0, 4.4 + 0.9 * max(0, len(series) - 2)))


def compare_chart(a_label: str, a: dict[str, Rate], b_label: str, b: dict[str, Rate]) -> Chart:
    """Two submissions' category means side by side (static and runtime panels), with intervals."""
    return categories_chart(
        [(a_label, a), (b_label, b)], f"Category success rates: {a_label} versus {b_label}, with 95% intervals"
    )


def diff_text(d: PairedDifference | None) -> str:
    """``-12.5 points [-30.0, +5.0], 16 pairs`` (for text alternatives)."""
    if d is None or d.value is None:
        return "not paired"
    ci = f" [{100 * d.ci95[0]:+.1f}, {100 * d.ci95[1]:+.1f}]" if d.ci95 else ""
    return f"{100 * d.value:+.1f} points{ci}, {d.pairs} pairs"


def difference_chart(
    title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[PairedDifference | None]]], xlabel: str
) -> Chart:
    """Paired differences of success rates (a forest plot): per label and series a dot at the
    difference in percentage points with its 95% paired interval, and the zero line."""
    n = max(len(series), 1)

    def draw(fig) -> None:
        ax = fig.subplots()
        ax.axvline(0, color=CHART["axis"], linewidth=1)
        step = 0.7 / n
        for i, (name, diffs) in enumerate(series):
            colour, _ = series_style(i)
            ys, xs, lo, hi = [], [], [], []
            for j, d in enumerate(diffs):
                if d is None or d.value is None:
                    continue
                ys.append(j - 0.35 + step * (i + 0.5))
                xs.append(100 * d.value)
                lo.append(max(0.0, 100 * (d.value - d.ci95[0])) if d.ci95 else 0.0)
                hi.append(max(0.0, 100 * (d.ci95[1] - d.value)) if d.ci95 else 0.0)
            if not xs:
                continue
            ax.errorbar(
                xs,
                ys,
                xerr=[lo, hi],
                fmt="os^Dvp"[i % 6],
                color=colour,
                ecolor=colour,
                markersize=5,
                elinewidth=1.4,
                capsize=2.5,
                label=name,
            )
        ax.set_yticks(range(len(labels)), list(labels), fontsize=8.5)
        ax.set_ylim(len(labels) - 0.5, -0.5)
        ax.set_xlim(-104, 104)  # room for a dot at +-100
        ticks = [-100, -50, 0, 50, 100]
        ax.set_xticks(ticks, [f"{t:+d}" if t else "0" for t in ticks])
        ax.grid(axis="x", color=CHART["grid"], linewidth=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.set_xlabel(xlabel)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=min(len(series), 4))

    alt = f"{title}. " + " ".join(
        f"{label}: " + "; ".join(f"{name} {diff_text(diffs[i])}" for name, diffs in series) + "."
        for i, label in enumerate(labels)
    )
    return Chart(title, alt, draw, (7.5, 1.5 + 0.3 * len(labels) * max(1.0, n / 2)))


def sweep_chart(
    title: str, values: Sequence[int], series: Sequence[tuple[str, Sequence[Rate | None]]], own: int | None = None
) -> Chart:
    """Success rate against a swept setting (replan steps K): one line per series with 95%
    whiskers at each value; the policy's own value is marked on the axis."""

    def draw(fig) -> None:
        ax = fig.subplots()
        xs = list(range(len(values)))
        for i, (name, rates) in enumerate(series):
            colour, _ = series_style(i)
            shown = [(x, r) for x, r in zip(xs, rates, strict=True) if r is not None and r.value is not None]
            if not shown:
                continue
            dodge = 0.06 * (i - (len(series) - 1) / 2)  # whiskers of one K side by side, not on top
            px, pr = [x + dodge for x, _ in shown], [r for _, r in shown]
            ax.errorbar(
                px,
                _values(pr),
                yerr=_xerr(pr),
                fmt="-" + "os^Dvp"[i % 6],
                color=colour,
                ecolor=colour,
                markersize=5,
                elinewidth=1.2,
                capsize=3,
                label=name,
            )
        ax.set_xticks(xs, [f"{k}\n(own)" if k == own else str(k) for k in values])
        ax.set_xlim(-0.5, len(values) - 0.5)
        _percent_axis(ax, "y")
        ax.set_xlabel("replan steps K (actions executed per chunk)")
        ax.set_ylabel("success rate")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=min(len(series), 3))

    alt = f"{title}. " + " ".join(
        f"K={k}: " + "; ".join(f"{name} {rate_text(rates[i])}" for name, rates in series) + "."
        for i, k in enumerate(values)
    )
    return Chart(title, alt, draw, (7.0, 4.2))


class ChartCache:
    """Rendered SVGs by key (LRU). Keys name the results a chart shows (row id and publication
    time), so a cached chart is never stale: results are immutable once published."""

    def __init__(self, max_entries: int = 512) -> None:
        self._lock = threading.Lock()
        self._svgs: LRUCache[Hashable, bytes] = LRUCache(max_entries)
        self.renders = 0  # charts drawn so far (tests use it to see the cache work)

    @property
    def max_entries(self) -> int:
        """Charts kept at most (the least recently used goes first)."""
        return int(self._svgs.maxsize)

    def get(self, key: Hashable, chart: Callable[[], Chart]) -> bytes:
        """The SVG for ``key``, drawing ``chart()`` only when it is not cached."""
        with self._lock:  # an LRUCache is not thread-safe (a hit reorders it)
            svg = self._svgs.get(key)
            if svg is not None:
                return svg
        svg = chart().render()  # outside the cache lock; two threads may draw the same chart once each
        with self._lock:
            self._svgs[key] = svg
            self.renders += 1
        return svg
