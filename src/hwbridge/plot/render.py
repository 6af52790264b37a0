"""Signals drawn with matplotlib (Agg, no display): PNG, SVG, or a self-contained HTML page.

Signals share one time axis (seconds after the first sample); signals with the same unit
share a panel, a signal with value labels gets a panel of its own, drawn as steps with its
labels as the tick names. matplotlib is imported only here, when something is drawn: it is
the `plot` extra (`pip install 'mcs-hwbridge[plot]'`).

Names, units, value labels and titles come from a database or a caller, so they are drawn as
the text they are: matplotlib reads `$...$` as TeX math (a unit of nested `\\sqrt` ran it out of
stack), so every dollar is escaped and TeX is off whatever the user's matplotlibrc says.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hwbridge.plot.series import Series, iso_utc

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "EXTRA_HINT",
    "FORMATS",
    "MAX_IMAGE_BYTES",
    "MAX_LABEL_CHARS",
    "PlotUnavailable",
    "figure",
    "panels",
    "png_within",
    "render",
    "require_matplotlib",
]

EXTRA_HINT = "pip install 'mcs-hwbridge[plot]'"
FORMATS = ("png", "svg", "html")
MAX_IMAGE_BYTES = 200_000
"""The largest picture a tool returns (PNG bytes)."""
MAX_TICK_LABELS = 24
MAX_LABEL_CHARS = 24
"""A value label longer than this is cut, ending in an ellipsis."""
_PANEL_HEIGHT_IN = 2.4
_DPI = 100


def _plain(text: str) -> str:
    """`text` as matplotlib draws it literally: a `$` escaped never starts math."""
    return text.replace("$", r"\$")


class PlotUnavailable(ImportError):
    """matplotlib is not installed: the message names the extra."""


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotUnavailable(
            f"drawing signals needs matplotlib, which is not installed: {EXTRA_HINT}"
        ) from None


def panels(series: Sequence[Series]) -> list[list[Series]]:
    """Series grouped into panels: one per unit, one per labelled signal; in first-seen order."""
    groups: dict[Any, list[Series]] = {}
    for s in series:
        key: Any = ("labels", s.name) if s.labels else ("unit", s.unit or "")
        groups.setdefault(key, []).append(s)
    return list(groups.values())


def figure(series: Sequence[Series], width_px: int = 1200, title: str | None = None) -> Figure:
    """The matplotlib Figure `render` saves: one panel per unit, steps for labelled signals,
    the legend beside each panel (for a caller that adds to it before saving)."""
    require_matplotlib()
    from matplotlib import rc_context

    with rc_context({"text.usetex": False}):  # whatever the user's matplotlibrc says
        return _draw(series, width_px, title)


def _draw(series: Sequence[Series], width_px: int, title: str | None) -> Figure:
    from matplotlib.figure import Figure

    groups = panels(series)
    width_in = width_px / _DPI
    height_in = 0.9 + _PANEL_HEIGHT_IN * len(groups)
    fig = Figure(figsize=(width_in, height_in), dpi=_DPI, layout="constrained")
    axes = fig.subplots(len(groups), 1, sharex=True, squeeze=False)[:, 0]
    starts = [s.t[0] for s in series if len(s.t)]
    t_ref = min(starts) if starts else 0.0
    for ax, group in zip(axes, groups, strict=True):
        for s in group:
            xs = [x - t_ref for x in s.t]
            label = _plain(s.name) + (" (downsampled)" if s.downsampled else "")
            if s.labels:
                ax.step(xs, list(s.v), where="post", label=label, linewidth=1.2)
                _label_ticks(ax, s)
            else:
                ax.plot(xs, list(s.v), label=label, linewidth=0.9)
        unit = group[0].unit
        ax.set_ylabel(_plain(unit) if unit else ("label" if group[0].labels else "value"))
        if not group[0].labels:
            ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        ax.grid(True, alpha=0.3)
        # beside the panel, not on it: inside, it covered the end of the lines
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small")
    axes[-1].set_xlabel(f"time (s) after {iso_utc(t_ref)}" if starts else "time (s)")
    if title:
        fig.suptitle(_plain(title))
    return fig


def _label_ticks(ax: Any, s: Series) -> None:
    items = sorted(s.labels.items())
    if len(items) > MAX_TICK_LABELS:  # only the labels the series takes
        seen = {float(v) for v in s.v}
        items = [(k, name) for k, name in items if float(k) in seen][:MAX_TICK_LABELS]
    if items:
        ax.set_yticks([float(k) for k, _ in items], [_plain(_cut(name)) for _, name in items])


def _cut(label: str, most: int = MAX_LABEL_CHARS) -> str:
    """A value label that fits beside the axis: a long one ends in an ellipsis, so that it
    is seen to be cut."""
    return label if len(label) <= most else label[: most - 1] + "\u2026"


def render(
    series: Sequence[Series],
    fmt: str,
    *,
    width_px: int = 1200,
    title: str | None = None,
) -> bytes:
    """The signals as a PNG, an SVG or a self-contained HTML page (no script, no network)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if not series:
        raise ValueError("nothing to draw: no signal")
    fig = figure(series, width_px, title)
    if fmt == "html":
        return _html(series, _save(fig, "svg"), title)
    return _save(fig, fmt)


def _save(fig: Figure, fmt: str, dpi: float = _DPI) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # the figure draws on Agg, whatever the global backend
    from matplotlib import rc_context

    out = io.BytesIO()
    metadata = {"Software": None} if fmt == "png" else {"Date": None}
    # SVG text stays text: searchable, smaller
    with rc_context({"text.usetex": False, "svg.fonttype": "none"}):
        fig.savefig(out, format=fmt, dpi=dpi, metadata=metadata)
    return out.getvalue()


def png_within(
    series: Sequence[Series],
    max_bytes: int = MAX_IMAGE_BYTES,
    *,
    width_px: int = 1000,
    title: str | None = None,
) -> bytes:
    """A PNG of the signals of at most `max_bytes`: drawn smaller until it fits."""
    if not series:
        raise ValueError("nothing to draw: no signal")
    fig = figure(series, width_px, title)
    dpi = float(_DPI)
    for _ in range(6):
        data = _save(fig, "png", dpi)
        if len(data) <= max_bytes:
            return data
        dpi *= 0.75 * math.sqrt(max_bytes / len(data))
    raise ValueError(f"the picture does not fit in {max_bytes} bytes; draw fewer signals")


def _html(series: Sequence[Series], svg: bytes, title: str | None) -> bytes:
    rows = []
    for s in series:
        values = [float(x) for x in s.v if not math.isnan(float(x))]
        low = f"{min(values):g}" if values else ""
        high = f"{max(values):g}" if values else ""
        first = iso_utc(s.t[0]) if len(s.t) else ""
        last = iso_utc(s.t[-1]) if len(s.t) else ""
        cells = (s.name, s.unit or "", f"{s.total:,}", f"{len(s.t):,}", low, high, first, last)
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    heading = html.escape(title or ", ".join(s.name for s in series))
    svg_text = svg.decode("utf-8")
    svg_text = svg_text[svg_text.find("<svg") :]  # inline: no XML prolog, no DOCTYPE
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{heading}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; margin-top: 1em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }}
svg {{ max-width: 100%; height: auto; }}
</style>
</head>
<body>
<h1>{heading}</h1>
<figure>
{svg_text}
</figure>
<table>
<thead><tr><th>signal</th><th>unit</th><th>samples</th><th>drawn</th><th>min</th><th>max</th>
<th>first</th><th>last</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody>
</table>
</body>
</html>
"""
    return page.encode("utf-8")
