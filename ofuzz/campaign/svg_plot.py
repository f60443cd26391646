"""One inline SVG line plot (the report's coverage curves, the search experiment's root causes over time): a few
series of (x, y) points, each optionally with a min-max band. Plain SVG so the report stays one self-contained file."""
from __future__ import annotations

import html

COLOURS = {"OLC": "#111", "OTC": "#1f77b4", "IDC": "#2ca02c", "ODC": "#ff7f0e", "SEC": "#9467bd", "SPC": "#d62728"}
_CYCLE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b"]

Series = list[tuple[float, float]]


def line_plot(series: dict[str, Series], title: str, ylabel: str, w: int = 640, h: int = 260, ymax: float | None = None,
              bands: dict[str, tuple[Series, Series]] | None = None, xunit: str = "s") -> str:
    """`series` name -> points; `bands` name -> (low points, high points) drawn shaded behind that series."""
    bands = bands or {}
    pts = [p for s in series.values() for p in s] + [p for lo, hi in bands.values() for p in [*lo, *hi]]
    if not pts:
        return f"<p><em>{html.escape(title)}: no data yet</em></p>"
    x0, x1 = 0.0, max(p[0] for p in pts) or 1.0
    y1 = ymax if ymax is not None else (max(p[1] for p in pts) or 1.0)
    L, B, R, T = 50, 30, 120, 25

    def xy(x: float, y: float) -> str:
        return f"{L + (x - x0) / (x1 - x0 or 1) * (w - L - R):.1f},{h - B - y / y1 * (h - B - T):.1f}"

    out = [f'<svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="11">',
           f'<text x="{L}" y="15" font-weight="bold">{html.escape(title)}</text>',
           f'<line x1="{L}" y1="{h - B}" x2="{w - R}" y2="{h - B}" stroke="#888"/><line x1="{L}" y1="{T}" x2="{L}" y2="{h - B}" stroke="#888"/>',
           f'<text x="{L}" y="{h - 8}">0</text><text x="{w - R - 40}" y="{h - 8}">{x1:.0f} {html.escape(xunit)}</text>',
           f'<text x="5" y="{T + 5}">{y1:g}</text><text x="5" y="{h - B}">0</text><text x="5" y="{(h - B + T) / 2}">{html.escape(ylabel)}</text>']
    for k, (name, s) in enumerate(series.items()):
        if not s:
            continue
        col = COLOURS.get(name, _CYCLE[k % len(_CYCLE)])
        if name in bands:
            lo, hi = bands[name]
            out.append(f'<polygon points="{" ".join(xy(*p) for p in [*hi, *reversed(lo)])}" fill="{col}" fill-opacity="0.18" stroke="none"/>')
        step = max(1, len(s) // 400)
        out.append(f'<polyline fill="none" stroke="{col}" stroke-width="{2 if name == "OLC" else 1.3}" '
                   f'points="{" ".join(xy(x, y) for x, y in s[::step] + [s[-1]])}"/>')
        out.append(f'<text x="{w - R + 8}" y="{T + 14 * k + 10}" fill="{col}">{html.escape(name)} {s[-1][1]:.3g}</text>')
    out.append("</svg>")
    return "".join(out)
