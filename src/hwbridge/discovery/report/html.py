"""A discovery report as one self-contained HTML page a browser opens offline.

    report = discover(["drive.blf"], reference="gnss.dbc", evidence=True)
    Path("report.html").write_text(render_html(report), encoding="utf-8")

Per frame id: its bits on a grid (byte by byte, bit 7 to 0 as `cantools dump` draws them),
each cell shaded by how often that bit flipped and outlined in the colour of the field it
belongs to; per field its bits from least to most significant as a heat row, its kind (value,
flag, counter, checksum, constant) and how it was found; and for a field matched to a
reference signal, the field decoded with its scale and offset drawn over the reference signal
(inline SVG), with r, scale and offset.

The page holds no script and loads nothing (a Content-Security-Policy forbids both), and every
string that came from a capture or a database (file names, message, signal and unit names,
notes) is escaped: a hostile DBC cannot put markup into it. It is bounded: the busiest
`MAX_IDS` ids are drawn (the page says how many were not), `MAX_FIELDS_DRAWN` fields an id,
`MAX_POINTS` points a series.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

from hwbridge.discovery.bits import cantools_chain
from hwbridge.discovery.report.evidence import MAX_IDS, MAX_POINTS, MessageEvidence, Plot
from hwbridge.discovery.report.models import DiscoveryReport, FieldReport, MessageReport
from hwbridge.discovery.report.names import message_name

if TYPE_CHECKING:
    from hwbridge.discovery.report.evidence import Evidence

__all__ = ["MAX_FIELDS_DRAWN", "render_html"]

MAX_FIELDS_DRAWN = 64
"""Fields listed per id (a CAN FD frame of 512 bits may hold hundreds of one-bit flags)."""

_PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b",
    "#e377c2", "#17becf", "#bcbd22", "#ff7f0e", "#393b79",
)  # fmt: skip
_KIND_COLOUR = {"constant": "#bbbbbb"}
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em auto;
 max-width:1100px;padding:0 1em;color:#222}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin:1.6em 0 .4em;
 border-bottom:1px solid #ddd;padding-bottom:.2em}h2 small{font-weight:normal;color:#666}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.summary,.bounds{color:#444}.bounds{background:#fff8e1;border:1px solid #f0d58c;
 padding:.4em .7em;border-radius:4px}
nav a{margin-right:.6em;white-space:nowrap}
table{border-collapse:collapse}
table.bits td,table.bits th{width:2.4em;height:1.7em;text-align:center;font-size:11px;
 border:1px solid #ccc}
table.bits th{background:#f4f4f4;font-weight:normal;color:#555}
table.fields{margin-top:.6em}table.fields td,table.fields th{padding:.15em .6em;
 text-align:left;vertical-align:middle;border-bottom:1px solid #eee}
.swatch{display:inline-block;width:.9em;height:.9em;border-radius:2px;vertical-align:middle}
.heat{display:inline-flex;gap:1px}.heat span{display:inline-block;width:9px;height:14px;
 border:1px solid #ccc}
table.fields td:first-child{white-space:nowrap}
.match{color:#1b5e20}.note{color:#8a6d00}
figure{margin:.6em 0 1em}figcaption{font-size:12.5px;color:#333}
svg text{font:11px system-ui,sans-serif;fill:#333}
.legend span{margin-right:1em}
"""


def _e(value: object) -> str:
    """Any text from a capture or a database, made inert."""
    return html.escape(str(value), quote=True)


def _heat(rate: float) -> str:
    """White for a bit that never flipped, deep orange for one that flips every other frame
    or more (square root: rare flips stay visible)."""
    if rate <= 0.0:
        return "#ffffff"
    level = math.sqrt(min(rate, 0.5) / 0.5)
    return f"hsl(24,95%,{97 - 50 * level:.0f}%)"


def _id_text(m: MessageReport | MessageEvidence) -> str:
    return f"0x{m.id:08X}" if m.extended else f"0x{m.id:03X}"


def _anchor(m: MessageReport) -> str:
    return f"id-{m.id:x}-{'x' if m.extended else 's'}"


def _where(f: FieldReport) -> str:
    order = "intel" if f.byte_order == "little_endian" else "motorola"
    return f"{f.start_bit}|{f.length}@{order}{'-' if f.signed else '+'}"


def render_html(report: DiscoveryReport, *, title: str | None = None) -> str:
    """The page for `report` (with its evidence when `discover(..., evidence=True)` made it;
    without, the fields are listed with no flip rates or plots)."""
    evidence: Evidence | None = report.evidence
    heading = title or "hwbridge discover: " + ", ".join(report.captures or ["capture"])
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(heading)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(heading)}</h1>",
    ]
    out += _summary(report, evidence)
    drawn = [
        m for m in report.messages if evidence is None or (m.id, m.extended) in evidence.messages
    ]
    if len(report.messages) > 1:
        links = " ".join(f'<a href="#{_anchor(m)}">{_id_text(m)}</a>' for m in drawn)
        out.append(f"<nav>{links}</nav>")
    for m in drawn:
        shown = None if evidence is None else evidence.messages.get((m.id, m.extended))
        out += _message(report, m, shown)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _summary(report: DiscoveryReport, evidence: Evidence | None) -> list[str]:
    kinds: dict[str, int] = {}
    for m in report.messages:
        for f in m.signals:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
    matched = sum(1 for m in report.messages for f in m.signals if f.reference is not None)
    counts = ", ".join(f"{n} {_e(k)}" for k, n in sorted(kinds.items())) or "no fields"
    out = [
        f'<p class="summary">{len(report.messages)} id(s) from {report.frames:,} frames: '
        f"{counts}; {matched} matched to a reference signal.</p>"
    ]
    if report.reference_messages:
        names = ", ".join(_e(n) for n in report.reference_messages[:50])
        out.append(f'<p class="summary">Decoded with the reference, not rediscovered: {names}</p>')
    bounds = [
        f"Each id shows at most {MAX_FIELDS_DRAWN} fields; each plot at most {MAX_POINTS} "
        "points, spread evenly over the capture."
    ]
    if evidence is None:
        bounds.insert(0, "No evidence was collected: flip rates and plots are not shown.")
    elif evidence.ids_left_out:
        bounds.insert(
            0,
            f"The {MAX_IDS} busiest ids are drawn; {evidence.ids_left_out} more are in the "
            "JSON report (<code>--json</code>) and the draft DBC only.",
        )
    if report.dropped:
        dropped = ", ".join(f"{_e(k)} {_e(v)}" for k, v in report.dropped.items())
        bounds.append(f"Left out while reading, to stay within bounds: {dropped}.")
    out.append(f'<p class="bounds">{" ".join(bounds)}</p>')
    if report.notes:
        out.append(f"<details><summary>{len(report.notes)} note(s)</summary><ul>")
        for note in report.notes[:200]:
            where = note.signal or note.message
            out.append(f'<li class="note"><code>{_e(where)}</code>: {_e(note.text)}</li>')
        if len(report.notes) > 200:
            out.append(f"<li>{len(report.notes) - 200} more notes in the JSON report</li>")
        out.append("</ul></details>")
    return out


def _message(report: DiscoveryReport, m: MessageReport, ev: MessageEvidence | None) -> list[str]:
    rate = f"{1000.0 / m.period_ms:.1f} Hz" if m.period_ms else "once"
    bits = "29-bit" if m.extended else "11-bit"
    facts = [bits, f"{m.dlc} bytes", rate, f"{m.frames:,} frames"]
    if ev is not None:
        facts.append(f"{ev.transitions:,} transitions")
    out = [
        f'<section id="{_anchor(m)}" class="message">',
        f"<h2>{_id_text(m)} <small>{_e(' · '.join(facts))}</small></h2>",
    ]
    fields = m.signals[:MAX_FIELDS_DRAWN]
    colour = {f.name: _colour(i, f) for i, f in enumerate(fields)}
    owner: dict[int, tuple[int, FieldReport]] = {}
    for i, f in enumerate(fields):
        for position in cantools_chain(f.start_bit, f.length, f.byte_order):
            owner[position] = (i, f)
    length = ev.length if ev is not None else m.dlc
    out += _grid(length, owner, colour, ev)
    out += _fields(report, m, fields, colour, ev)
    if ev is not None:
        for f in fields:
            plot = ev.plots.get(f.name)
            if plot is not None and f.reference is not None:
                out += _plot(f, plot, colour[f.name])
    out.append("</section>")
    return out


def _colour(index: int, f: FieldReport) -> str:
    return _KIND_COLOUR.get(f.kind, _PALETTE[index % len(_PALETTE)])


def _grid(
    length: int,
    owner: dict[int, tuple[int, FieldReport]],
    colour: dict[str, str],
    ev: MessageEvidence | None,
) -> list[str]:
    head = "".join(f"<th>{b}</th>" for b in range(7, -1, -1))
    out = ['<table class="bits" aria-label="bit layout">', f"<tr><th>byte</th>{head}</tr>"]
    for byte in range(length):
        cells = [f"<th>{byte}</th>"]
        for bit in range(7, -1, -1):
            position = byte * 8 + bit
            rate = (
                ev.flip_rates[position] if ev is not None and position < len(ev.flip_rates) else 0.0
            )
            style = f"background:{_heat(rate)}"
            title = f"bit {position} (byte {byte}, bit {bit})"
            if ev is not None:
                title += f": flipped in {rate:.1%} of transitions"
            label = ""
            found = owner.get(position)
            if found is not None:
                index, f = found
                style += f";box-shadow:inset 0 0 0 2px {colour[f.name]}"
                title += f"; {f.name}"
                label = str(index + 1)
            cells.append(f'<td style="{style}" title="{_e(title)}">{label}</td>')
        out.append(f"<tr>{''.join(cells)}</tr>")
    out.append("</table>")
    return out


def _fields(
    report: DiscoveryReport,
    m: MessageReport,
    fields: list[FieldReport],
    colour: dict[str, str],
    ev: MessageEvidence | None,
) -> list[str]:
    out = [
        '<table class="fields"><tr><th>#</th><th>field</th><th>bits</th><th>kind</th>'
        "<th>flips, LSB to MSB</th><th>meaning</th></tr>"
    ]
    mname = message_name(m.id, m.extended)
    for i, f in enumerate(fields):
        chain = cantools_chain(f.start_bit, f.length, f.byte_order)
        heat = ""
        if ev is not None:
            spans = []
            for position in chain[:64]:
                rate = ev.flip_rates[position] if position < len(ev.flip_rates) else 0.0
                spans.append(
                    f'<span style="background:{_heat(rate)}" '
                    f'title="bit {position}: {rate:.1%}"></span>'
                )
            heat = f'<span class="heat">{"".join(spans)}</span>'
        meaning = ""
        if f.reference is not None:
            unit = f" {_e(f.unit)}" if f.unit else ""
            meaning = (
                f'<span class="match">×{f.scale:g} {f.offset:+g}{unit} ~ '
                f"{_e(f.reference.message)}.{_e(f.reference.signal)} "
                f"r={f.reference.r:.3f} R²={f.reference.r2:.3f} {f.reference.verdict}</span>"
            )
        how = report.comment_of(mname, f.name)
        if how:
            meaning += f'<div class="note">{_e(how)}</div>'
        swatch = f'<span class="swatch" style="background:{colour[f.name]}"></span>'
        out.append(
            f"<tr><td>{swatch} {i + 1}</td><td><code>{_e(f.name)}</code></td>"
            f'<td class="mono">{_e(_where(f))}</td><td>{_e(f.kind)}</td>'
            f"<td>{heat}</td><td>{meaning}</td></tr>"
        )
    out.append("</table>")
    if len(m.signals) > len(fields):
        out.append(
            f"<p>{len(m.signals) - len(fields)} more field(s) of this id are in the JSON "
            "report and the draft DBC.</p>"
        )
    return out


_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 720, 200, 64, 12, 12, 28


def _plot(f: FieldReport, plot: Plot, colour: str) -> list[str]:
    """The field decoded and the reference signal, on one time axis and one value axis."""
    assert f.reference is not None
    times = plot.field_t + plot.reference_t
    vals = plot.field_v + plot.reference_v
    if not times or not vals:
        return []
    t0, t1 = min(times), max(times)
    v0, v1 = min(vals), max(vals)
    if t1 <= t0:
        t1 = t0 + 1.0
    if v1 <= v0:
        v0, v1 = v0 - 1.0, v1 + 1.0
    width, height = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B

    def points(t: list[float], v: list[float]) -> str:
        return " ".join(
            f"{_PAD_L + (a - t0) / (t1 - t0) * width:.1f},"
            f"{_PAD_T + (1 - (b - v0) / (v1 - v0)) * height:.1f}"
            for a, b in zip(t, v, strict=False)
        )

    unit = f" {f.unit}" if f.unit else ""
    reference = f"{f.reference.message}.{f.reference.signal}"
    label = f"{f.name} vs {reference}"
    caption = (
        f"<code>{_e(f.name)}</code> decoded (×{f.scale:g} {f.offset:+g}{_e(unit)}, "
        f'<span style="color:{colour}">solid</span>) over '
        f"<code>{_e(reference)}</code> (grey, dashed): r={f.reference.r:.3f}, "
        f"scale {f.scale:g} (least squares: {f.reference.fitted_scale:g}), offset {f.offset:g},"
        f" R²={f.reference.r2:.4f} ({f.reference.verdict}); {len(plot.field_t)} and "
        f"{len(plot.reference_t)} points over {t1 - t0:.1f} s"
    )
    bottom = _H - _PAD_B
    return [
        f'<figure><svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" role="img" aria-label="{_e(label)}">',
        f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{width}" height="{height}" fill="#fafafa" '
        'stroke="#ccc"/>',
        f'<text x="{_PAD_L - 4}" y="{_PAD_T + 10}" text-anchor="end">{v1:.4g}</text>',
        f'<text x="{_PAD_L - 4}" y="{bottom}" text-anchor="end">{v0:.4g}</text>',
        f'<text x="{_PAD_L}" y="{_H - 8}">{0:.0f} s</text>',
        f'<text x="{_W - _PAD_R}" y="{_H - 8}" text-anchor="end">{t1 - t0:.1f} s</text>',
        f'<text x="{_PAD_L + width / 2:.0f}" y="{_H - 8}" text-anchor="middle">'
        f"{_e(unit.strip() or 'value')}</text>",
        f'<polyline fill="none" stroke="#888" stroke-width="2" stroke-dasharray="5,3" '
        f'points="{points(plot.reference_t, plot.reference_v)}"/>',
        f'<polyline fill="none" stroke="{colour}" stroke-width="1.4" '
        f'points="{points(plot.field_t, plot.field_v)}"/>',
        "</svg>",
        f"<figcaption>{caption}</figcaption></figure>",
    ]
