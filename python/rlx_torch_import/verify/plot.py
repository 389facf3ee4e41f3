"""The per-node error plot of report.html: local and cumulative max abs error along the graph on a log axis,
written as inline SVG by hand (a few hundred lines of markup: no plotting library to import, which cost a
conversion more than half a second; docs/design.md, decision ai).

What it draws: x the node index, y the max abs error (log axis; an error of exactly 0 at `EPSILON`, a node
without a value a gap); each budget as a dashed step; a red x on each error over its budget, a red
triangle at the top for a non-finite one; the first divergence as a vertical line; a legend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from .report import NodeError, NodeParity

# Zero errors are drawn at this value on the plot's log axis (said under the plot).
EPSILON = 1e-12

LOCAL, CUMULATIVE, BAD, FIRST = "#1f77b4", "#ff7f0e", "#c62828", "#e0a800"
_W, _PLOT_H = 1200, 340  # the drawing's own units (CSS scales it to the page): its width, the axes' height
_LEFT, _RIGHT, _BOTTOM = 78, 12, 50  # margins beside and below the axes; above them: the legend
_COLUMN, _ROW = 250, 18  # a legend entry's width and height


def _series(errs: Sequence[NodeError | None]) -> tuple[list[float], list[float]]:
    """Max abs errors (zeros floored at EPSILON, missing and non-finite as NaN) and budgets (NaN where
    none is drawn: no value, or an exact budget of 0), per node."""
    ys, budgets = [], []
    for e in errs:
        ys.append(max(e.max_abs, EPSILON) if e is not None and math.isfinite(e.max_abs) else math.nan)
        ok = e is not None and math.isfinite(e.allowed_abs) and e.allowed_abs > 0
        budgets.append(e.allowed_abs if ok and e is not None else math.nan)
    return ys, budgets


class _Axes:
    """Data -> drawing coordinates: x linear over the node indices, y log10 over whole decades; the axes
    start `top` units down (below the legend) and the drawing is `total` units high."""

    def __init__(self, xs: Sequence[int], values: Sequence[float], top: int) -> None:
        self.x0, self.x1 = (min(xs) - 0.5, max(xs) + 0.5) if xs else (-0.5, 0.5)
        finite = [v for v in values if v > 0 and math.isfinite(v)]
        low, high = (min(finite), max(finite)) if finite else (EPSILON, 1.0)
        self.d0, self.d1 = math.floor(math.log10(low)), math.ceil(math.log10(high))
        if self.d1 <= self.d0:
            self.d1 = self.d0 + 1
        self.top, self.width, self.height = top, _W - _LEFT - _RIGHT, _PLOT_H
        self.bottom = top + _PLOT_H  # the x axis
        self.total = self.bottom + _BOTTOM

    def x(self, v: float) -> float:
        return _LEFT + (v - self.x0) / (self.x1 - self.x0) * self.width

    def y(self, v: float) -> float:
        return self.top + (self.d1 - math.log10(v)) / (self.d1 - self.d0) * self.height


def _path(points: Sequence[tuple[float, float]]) -> str:
    """An SVG path through `points`, a new stroke after each NaN (a gap)."""
    parts, pen = [], "M"
    for x, y in points:
        if math.isnan(y):
            pen = "M"
            continue
        parts.append(f"{pen}{x:.1f},{y:.1f}")
        pen = "L"
    return "".join(parts)


def _line(ax: _Axes, xs: Sequence[int], ys: Sequence[float]) -> str:
    return _path([(ax.x(x), ax.y(y) if not math.isnan(y) else math.nan) for x, y in zip(xs, ys, strict=True)])


def _steps(ax: _Axes, xs: Sequence[int], ys: Sequence[float]) -> str:
    """A step line: each value level from halfway to the previous node to halfway to the next."""
    points: list[tuple[float, float]] = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        left = (xs[i - 1] + x) / 2 if i else x - 0.5
        right = (x + xs[i + 1]) / 2 if i + 1 < len(xs) else x + 0.5
        level = ax.y(y) if not math.isnan(y) else math.nan
        points += [(ax.x(left), level), (ax.x(right), level)]
    return _path(points)


def _x_ticks(x0: float, x1: float) -> list[int]:
    """At most about 10 node indices on a 1/2/5 step."""
    span = max(x1 - x0, 1.0)
    step = 1
    for scale in (10**k for k in range(12)):
        step = next((m * scale for m in (1, 2, 5) if span / (m * scale) <= 10), 0)
        if step:
            break
    return list(range(math.ceil(x0 / step) * step, int(x1) + 1, step))


def _frame(ax: _Axes) -> list[str]:
    """Grid, axes, tick labels and axis titles."""
    out = []
    every = max(1, math.ceil((ax.d1 - ax.d0) / 12))  # at most about 12 decade labels
    for d in range(ax.d0, ax.d1 + 1, every):
        y = ax.y(10.0**d)
        out.append(f'<path d="M{_LEFT},{y:.1f}H{_W - _RIGHT}" stroke="#ddd"/>')
        out.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{10.0**d:.0e}</text>')
    for t in _x_ticks(ax.x0, ax.x1):
        x = ax.x(t)
        out.append(f'<path d="M{x:.1f},{ax.bottom}v5" stroke="#444"/>')
        out.append(f'<text x="{x:.1f}" y="{ax.bottom + 18}" text-anchor="middle">{t}</text>')
    out.append(f'<rect x="{_LEFT}" y="{ax.top}" width="{ax.width}" height="{ax.height}" fill="none" stroke="#444"/>')
    middle = f'x="{_LEFT + ax.width / 2:.0f}" y="{ax.total - 8}" text-anchor="middle"'
    out.append(f"<text {middle}>node index (graph order)</text>")
    out.append(
        f'<text transform="translate(16,{ax.top + ax.height / 2:.0f}) rotate(-90)" text-anchor="middle">'
        f"max abs error (zeros at {EPSILON:g})</text>"
    )
    return out


def _marks(ax: _Axes, nodes: Sequence[NodeParity], local: list[float], cum: list[float]) -> tuple[str, bool, bool]:
    """Red x at each error over its budget, red triangle at the top for a non-finite one; whether any of each."""
    crosses, triangles = [], []
    for n, lo, cu in zip(nodes, local, cum, strict=True):
        for err, y in ((n.local, lo), (n.cumulative, cu)):
            if err is None or err.ok:
                continue
            x = ax.x(n.index)
            if math.isnan(y):
                triangles.append(f"M{x - 5:.1f},{ax.top + 10}L{x + 5:.1f},{ax.top + 10}L{x:.1f},{ax.top + 1}Z")
            else:
                py = ax.y(y)
                crosses.append(f"M{x - 5:.1f},{py - 5:.1f}l10,10M{x - 5:.1f},{py + 5:.1f}l10,-10")
    out = ""
    if crosses:
        out += f'<path d="{"".join(crosses)}" stroke="{BAD}" stroke-width="2" fill="none"/>'
    if triangles:
        out += f'<path d="{"".join(triangles)}" fill="{BAD}"/>'
    return out, bool(crosses), bool(triangles)


def _legend(entries: Sequence[tuple[str, str]]) -> str:
    """Entries (label, sample markup drawn at the origin) in three columns above the axes."""
    out = []
    for i, (label, sample) in enumerate(entries):
        x, y = _LEFT + 6 + (i % 3) * _COLUMN, 12 + (i // 3) * _ROW
        out.append(f'<g transform="translate({x},{y})">{sample}<text x="30" y="4">{escape(label)}</text></g>')
    return "".join(out)


def error_plot_svg(nodes: Sequence[NodeParity], first: NodeParity | None = None) -> str:
    """Local and cumulative max abs error along the graph, on a log axis, as an inline <svg> element for
    HTML (no XML prolog or namespace: HTML parses inline SVG without them)."""
    xs = [n.index for n in nodes]
    local, local_budget = _series([n.local for n in nodes])
    cum, cum_budget = _series([n.cumulative for n in nodes])
    same = all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(local_budget, cum_budget, strict=True))
    bad = [e is not None and not e.ok for n in nodes for e in (n.local, n.cumulative)]
    legend_rows = (2 + (not same) + 2 + any(bad) + (first is not None) + 2) // 3  # before the axes: sizes them
    finite = [y for y in (*local, *cum, *local_budget, *cum_budget) if not math.isnan(y)]
    ax = _Axes(xs, [*finite, max(finite, default=1.0) * 10], top=legend_rows * _ROW + 12)  # room for the top marks
    body = _frame(ax)
    dashed = 'fill="none" stroke-width="1.2" stroke-dasharray="5,3" stroke-opacity="0.6"'
    entries = [("local budget", f'<path d="M0,0h24" stroke="{LOCAL}" {dashed}/>')]
    body.append(f'<path d="{_steps(ax, xs, local_budget)}" stroke="{LOCAL}" {dashed}/>')
    if not same:
        body.append(f'<path d="{_steps(ax, xs, cum_budget)}" stroke="{CUMULATIVE}" {dashed}/>')
        entries.append(("cumulative budget", f'<path d="M0,0h24" stroke="{CUMULATIVE}" {dashed}/>'))
    for name, ys, colour in (("local", local, LOCAL), ("cumulative", cum, CUMULATIVE)):
        body.append(f'<path d="{_line(ax, xs, ys)}" stroke="{colour}" stroke-width="1.5" fill="none"/>')
        if len(nodes) <= 60:  # a dot per node while few
            dots = [
                f'<circle cx="{ax.x(x):.1f}" cy="{ax.y(y):.1f}" r="2.5"/>' for x, y in zip(xs, ys, strict=True) if y > 0
            ]
            body.append(f'<g fill="{colour}">{"".join(dots)}</g>')
        entries.append((f"{name} max abs error", f'<path d="M0,0h24" stroke="{colour}" stroke-width="1.5"/>'))
    marks, crossed, topped = _marks(ax, nodes, local, cum)
    body.append(marks)
    if crossed:
        entries.append(("over budget", f'<path d="M7,-5l10,10M7,5l10,-10" stroke="{BAD}" stroke-width="2"/>'))
    if topped:
        entries.append(("non-finite error", f'<path d="M7,5L17,5L12,-4Z" fill="{BAD}"/>'))
    if first is not None:
        x = ax.x(first.index)
        body.append(f'<path d="M{x:.1f},{ax.top}V{ax.bottom}" stroke="{FIRST}" stroke-width="2"/>')
        entries.append((f"first divergence (#{first.index})", f'<path d="M0,0h24" stroke="{FIRST}" stroke-width="2"/>'))
    body.append(_legend(entries))
    return (
        f'<svg viewBox="0 0 {_W} {ax.total}" width="{_W}" height="{ax.total}" font-family="system-ui, sans-serif" '
        f'font-size="12" role="img" aria-label="max abs error per node">' + "".join(body) + "</svg>"
    )
