"""The site's colours, in one place: the CSS variables of every page and the chart colours come
from here, so that the contrast tests check what is actually drawn.

Contrast is the WCAG 2.x ratio: text needs 4.5:1 against its background, graphical objects
(bars, markers, interval lines) 3:1. Series colours are Okabe-Ito (distinguishable with the
common colour-vision deficiencies); the second series is also hatched, so it never depends on
colour alone.
"""

from __future__ import annotations

#: Page colours (CSS custom properties ``--<name>``).
PAGE: dict[str, str] = {
    "bg": "#ffffff",
    "fg": "#1b1f24",
    "muted": "#57606a",
    "link": "#0a58ca",
    "link-visited": "#6f42c1",
    "surface": "#f6f8fa",
    "border": "#d0d7de",
    "highlight": "#fff8c5",
    "focus": "#0a58ca",
    "good": "#116329",
    "bad": "#a40e26",
}

#: Text-on-background pairs the pages use (foreground key, background key).
TEXT_PAIRS: list[tuple[str, str]] = [
    (fg, bg) for fg in ("fg", "muted", "link", "link-visited", "good", "bad") for bg in ("bg", "surface", "highlight")
]

#: Chart colours.
CHART: dict[str, str] = {
    "text": "#1b1f24",
    "axis": "#57606a",
    "grid": "#d0d7de",
    "interval": "#1b1f24",
    "static": "#0072B2",  # Okabe-Ito blue
    "runtime": "#D55E00",  # Okabe-Ito vermillion (hatched)
    "a": "#0072B2",  # comparison: first submission
    "b": "#CC79A7",  # comparison: second submission (hatched)
    "c": "#009E73",  # third series (Okabe-Ito bluish green, dotted hatch)
    "d": "#D55E00",  # fourth series (cross-hatched)
    "e": "#6A3D9A",  # fifth series (purple)
    "f": "#8C6D1F",  # sixth series (brown)
    "nominal": "#1b1f24",
    "missing": "#eaeef2",
}

#: Colours drawn as data marks on the white chart background (need 3:1).
CHART_MARKS: tuple[str, ...] = ("static", "runtime", "a", "b", "c", "d", "e", "f", "interval", "nominal", "axis")

#: Several series side by side (policies in a report, conditions of a study): colour and hatch
#: of series i are ``SERIES[i % len(SERIES)]``, so no series depends on colour alone.
SERIES: tuple[tuple[str, str], ...] = (("a", ""), ("b", "///"), ("c", "..."), ("d", "xx"), ("e", "\\\\"), ("f", "--"))

#: Colormap of the shift heatmap (perceptually uniform, colour-vision-deficiency friendly).
HEATMAP_CMAP = "cividis"


def _channel(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def relative_luminance(colour: str | tuple[float, ...]) -> float:
    """WCAG relative luminance of ``#rrggbb`` or an (r, g, b) or (r, g, b, alpha) tuple in [0, 1]
    (alpha ignored)."""
    if isinstance(colour, str):
        h = colour.lstrip("#")
        r, g, b = (int(h[i : i + 2], 16) / 255 for i in (0, 2, 4))
    else:
        r, g, b = colour[:3]
    return 0.2126 * _channel(r) + 0.7152 * _channel(g) + 0.0722 * _channel(b)


def contrast(a: str | tuple[float, ...], b: str | tuple[float, ...]) -> float:
    """WCAG contrast ratio between two colours (1 to 21)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_on(background: str | tuple[float, ...]) -> str:
    """Black or white text, whichever contrasts more with ``background`` (always >= 4.58:1: for
    any colour the better of pure black and white reaches sqrt(21); a softer black would not)."""
    dark, light = "#000000", "#ffffff"
    return dark if contrast(dark, background) >= contrast(light, background) else light


def css_variables() -> str:
    """``--name: #rrggbb;`` declarations for the pages' ``:root`` (page colours and the two series)."""
    colours = {**PAGE, "static": CHART["static"], "runtime": CHART["runtime"]}
    return " ".join(f"--{k}: {v};" for k, v in colours.items())
