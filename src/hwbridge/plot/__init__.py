"""Pictures of signals, for the `hwbridge plot` command and for the tools that show.

    from hwbridge.plot import Series, render
    png = render([Series("EEC1.EngineSpeed", "rpm", t, v, total=len(t))], "png")

`downsample` keeps the first, last, minimum and maximum sample of each time bucket (one
bucket per pixel column), so ten million samples draw as fast as a few thousand and look
the same. Drawing needs matplotlib: `pip install 'mcs-hwbridge[plot]'`.
"""

from __future__ import annotations

from hwbridge._lazy import lazy_package
from hwbridge.plot.render import (
    EXTRA_HINT,
    FORMATS,
    MAX_IMAGE_BYTES,
    PlotUnavailable,
    panels,
    png_within,
    render,
    require_matplotlib,
)
from hwbridge.plot.series import (
    MAX_POINTS,
    Series,
    bucket_points,
    downsample,
    iso_utc,
    series_summary,
    timeseries_result,
)

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
