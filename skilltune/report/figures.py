"""The report's plots, drawn with plotly (its script is inlined once by the page, never fetched).

Each figure is aggregated per unit, arm or task, never per rollout, so a run of 200 units and
50,000 rollouts draws a few hundred marks. Every figure returns an HTML fragment (a div and
the call that draws it) with a stable id the tests and the page refer to.
"""

from __future__ import annotations

import math
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from skilltune.report.model import RunSummary

if TYPE_CHECKING:
    import plotly.graph_objects as go

KEEP, DISCARD, INCUMBENT, TEST, VAL = "#1a9850", "#8c8c8c", "#4575b4", "#d73027", "#fdae61"
STAGE_COLORS = {
    "baseline": "#6a3d9a", "rollout": "#4575b4", "reflect": "#fdae61", "edit": "#ffd92f", "screen": "#a6d96a",
    "gate": "#1a9850", "compare": "#d73027", "slow_update": "#f46d43",
}  # fmt: skip
# plotly.js's cartesian bundle (npm plotly.js-cartesian-dist-min, pinned in static/package-lock.json,
# installed by make install): scatter, bar and heatmap, every trace drawn here, in 1.5 MB where
# the full bundle the plotly package ships is 4.8 MB and would be inlined in every report.
CARTESIAN = Path(__file__).parent / "static/node_modules/plotly.js-cartesian-dist-min/plotly-cartesian.min.js"
_BUNDLE_VERSION = re.compile(r"plotly\.js \(cartesian[^)]*\) v(\d+\.\d+\.\d+)")
CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}


def _html(fig: go.Figure, div_id: str, height: int, legend_y: float = 1.08, top: int = 40) -> str:
    import plotly.io as pio

    fig.update_layout(
        template="plotly_white", height=height, margin={"l": 60, "r": 20, "t": top, "b": 60},
        font={"family": "system-ui, sans-serif", "size": 12}, legend={"orientation": "h", "y": legend_y},
    )  # fmt: skip
    html: str = pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id, config=CONFIG)
    return html


def val_figure(summary: RunSummary) -> str | None:
    """Val of candidate and incumbent per gated unit (top) and the gain with the gate's interval (bottom)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    gated = [u for u in summary.units if u.val_candidate is not None and u.val_incumbent is not None]
    if not gated:
        return None
    names = [u.name for u in gated]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.55, 0.45])
    colors = [KEEP if u.verdict == "keep" else DISCARD for u in gated]
    hover = [f"{u.name}: {u.verdict} ({u.decision})<br>{u.reason}" for u in gated]
    fig.add_trace(
        go.Scatter(
            x=names,
            y=[u.val_incumbent for u in gated],
            name="incumbent",
            mode="markers",
            marker={"color": INCUMBENT, "symbol": "circle-open", "size": 10},
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=names,
            y=[u.val_candidate for u in gated],
            name="candidate (green: kept)",
            mode="markers",
            marker={"color": colors, "size": 9},
            hovertext=hover,
            hoverinfo="text+y",
        ),
        row=1,
        col=1,
    )
    with_interval = [u for u in gated if u.interval is not None]
    gains = [u.interval.gain for u in with_interval if u.interval]
    plus = [
        (u.interval.high - u.interval.gain) if u.interval and u.interval.high is not None else 0
        for u in with_interval
    ]
    minus = [
        (u.interval.gain - u.interval.low) if u.interval and u.interval.low is not None else 0
        for u in with_interval
    ]
    fig.add_trace(
        go.Scatter(
            x=[u.name for u in with_interval],
            y=gains,
            name="gain, gate interval",
            mode="markers",
            marker={"color": [KEEP if u.verdict == "keep" else DISCARD for u in with_interval], "size": 8},
            error_y={
                "type": "data",
                "array": plus,
                "arrayminus": minus,
                "symmetric": False,
                "thickness": 1.2,
                "color": "#555",
            },
        ),
        row=2,
        col=1,
    )
    fig.add_hline(y=0, line={"color": "#444", "width": 1}, row=2, col=1)
    if summary.min_effect is not None:
        fig.add_hline(
            y=summary.min_effect, line={"color": KEEP, "width": 1, "dash": "dot"}, row=2, col=1,
            annotation_text="min effect", annotation_position="top left",
        )  # fmt: skip
    fig.update_yaxes(title_text=f"val {summary.metric}", row=1, col=1)
    fig.update_yaxes(title_text="gain", row=2, col=1)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=names)
    return _html(fig, "plot-val", 520)


def held_out_figure(summary: RunSummary) -> str | None:
    """Each arm on the held-out split with its 95% CI beside its val score (the val -> test gap),
    and each pair's difference with its CI."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    held = summary.held_out
    if held is None or not held.arms:
        return None
    fig = make_subplots(
        rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.12,
        subplot_titles=(f"arms: {held.split} vs val", "paired difference (b - a), 95% CI"),
    )  # fmt: skip
    arms = held.arms
    fig.add_trace(
        go.Scatter(
            x=[a.name for a in arms],
            y=[a.mean for a in arms],
            name=f"{held.split} (95% CI)",
            mode="markers",
            marker={"color": TEST, "size": 11},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [
                    (a.high - a.mean) if a.high is not None and a.mean is not None else 0 for a in arms
                ],
                "arrayminus": [
                    (a.mean - a.low) if a.low is not None and a.mean is not None else 0 for a in arms
                ],
            },
        ),
        row=1,
        col=1,
    )
    with_val = [a for a in arms if a.val is not None]
    fig.add_trace(
        go.Scatter(
            x=[a.name for a in with_val],
            y=[a.val for a in with_val],
            name="val",
            mode="markers",
            marker={"color": VAL, "size": 11, "symbol": "diamond"},
        ),
        row=1,
        col=1,
    )
    pairs = held.pairs
    fig.add_trace(
        go.Scatter(
            x=[p.diff for p in pairs],
            y=[f"{p.b} - {p.a}" for p in pairs],
            name="difference",
            mode="markers",
            marker={"color": [KEEP if p.verdict == "b_better" else DISCARD for p in pairs], "size": 11},
            error_x={
                "type": "data",
                "symmetric": False,
                "color": "#555",
                "array": [(p.high - p.diff) if p.high is not None else 0 for p in pairs],
                "arrayminus": [(p.diff - p.low) if p.low is not None else 0 for p in pairs],
            },
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    fig.add_vline(x=0, line={"color": "#444", "width": 1}, row=1, col=2)
    fig.update_yaxes(title_text=held.metric, range=[-0.02, 1.05], row=1, col=1)
    fig.update_xaxes(range=[-1, 1], row=1, col=2)
    return _html(fig, "plot-heldout", 380, legend_y=-0.15)


HEAT_ROW = 18  # px per task row: a tick label of the 12 px font fits without touching its neighbours
HEAT_GAP = 70  # px between agents' panels: the panel's title and its unit labels
HEAT_UNIT_LABELS = 10  # unit labels a panel's axis holds side by side ("step_0001" at about 90 px)


def heatmap_figure(summary: RunSummary) -> str | None:
    """Val tasks x units: the candidate's mean score per task in each unit's gate (buttons show the
    incumbent's and the difference). With several agents, one panel per agent (its tasks, titled
    with its label), the panels sharing the units and one color scale. The figure grows with the
    rows (``HEAT_ROW`` px each), so every task's label is drawn apart from its neighbours. None when
    no unit ran a gate (units carried on ungated, or stopped before it): a figure of blank cells,
    as tall as the tasks, would say nothing."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    heat = summary.heatmap
    if heat is None or all(cell is None for row in heat.candidate for cell in row):
        return None
    gain = [
        [None if c is None or i is None else round(c - i, 4) for c, i in zip(crow, irow, strict=True)]
        for crow, irow in zip(heat.candidate, heat.incumbent, strict=True)
    ]
    groups = _agent_rows(heat.tasks, summary.agents)
    plot = HEAT_ROW * len(heat.tasks) + HEAT_GAP * (len(groups) - 1)
    fig = make_subplots(
        rows=len(groups), cols=1, shared_xaxes=False, row_heights=[len(rows) for _, rows in groups],
        vertical_spacing=HEAT_GAP / plot if len(groups) > 1 else 0,
        subplot_titles=[f"agent {label} ({len(rows)} val tasks)" for label, rows in groups] if len(groups) > 1 else None,
    )  # fmt: skip

    every = math.ceil(len(heat.units) / HEAT_UNIT_LABELS)

    def part(z: list[list[float | None]], rows: list[int]) -> list[list[float | None]]:
        return [z[i] for i in rows]

    for n, (label, rows) in enumerate(groups, start=1):
        names = [heat.tasks[i] for i in rows]
        shown = [name.removeprefix(f"{label}/") for name in names] if label else names
        fig.add_trace(
            go.Heatmap(
                z=part(heat.candidate, rows), x=heat.units, y=shown, zmin=0, zmax=1, colorscale="RdYlGn",
                hoverongaps=False, showscale=n == 1, customdata=[[name] * len(heat.units) for name in names],
                colorbar={"title": {"text": summary.metric}, "lenmode": "pixels", "len": 300, "y": 1, "yanchor": "top"},
                hovertemplate="%{customdata}<br>%{x}: %{z:.3f}<extra></extra>",
            ),
            row=n, col=1,
        )  # fmt: skip
        fig.update_yaxes(tickmode="array", tickvals=shown, autorange="reversed", row=n, col=1)
        # level labels, every k-th unit's when there are many: turned ones would reach the next panel
        fig.update_xaxes(type="category", tickangle=0, dtick=every, row=n, col=1)
    scales = {
        "candidate": (heat.candidate, 0, 1),
        "incumbent": (heat.incumbent, 0, 1),
        "candidate - incumbent": (gain, -1, 1),
    }
    each = len(groups)
    fig.update_layout(
        updatemenus=[
            {
                "type": "buttons", "direction": "right", "x": 0, "y": 1 + 30 / plot, "yanchor": "bottom",
                "xanchor": "left", "showactive": True,
                "buttons": [
                    {
                        "label": label, "method": "restyle",
                        "args": [{"z": [part(z, rows) for _, rows in groups], "zmin": [lo] * each, "zmax": [hi] * each}],
                    }
                    for label, (z, lo, hi) in scales.items()
                ],
            }
        ]
    )  # fmt: skip
    top = 80
    return _html(fig, "plot-heatmap", plot + top + 60, top=top)


def _agent_rows(tasks: list[str], agents: list[str]) -> list[tuple[str, list[int]]]:
    """(agent label, the positions of its rows) per agent in the order of ``agents``, for a run of
    several agents whose rows are ``label/task``; one group labelled "" otherwise."""
    if len(agents) < 2:
        return [("", list(range(len(tasks))))]
    groups: dict[str, list[int]] = {label: [] for label in agents}
    for i, task in enumerate(tasks):
        label = max((a for a in agents if task.startswith(f"{a}/")), key=len, default=None)
        if label is None:
            return [("", list(range(len(tasks))))]
        groups[label].append(i)
    return [(label, rows) for label, rows in groups.items() if rows]


COST_MEASURES = ("seconds", "rollouts", "tokens", "usd")


def cost_figure(summary: RunSummary) -> str | None:
    """Wall time (buttons: rollouts, tokens, USD) per unit, stacked by stage."""
    import plotly.graph_objects as go

    units = [u.name for u in summary.units]
    if not units:
        return None
    stages = sorted({s.stage for s in summary.stages if s.unit in set(units)}, key=_stage_order)
    cells = {(s.unit, s.stage): s for s in summary.stages}

    def values(stage: str, measure: str) -> list[float]:
        return [float(getattr(cells[(u, stage)], measure)) if (u, stage) in cells else 0.0 for u in units]

    fig = go.Figure(
        [
            go.Bar(x=units, y=values(stage, "seconds"), name=stage, marker={"color": STAGE_COLORS.get(stage)})
            for stage in stages
        ]
    )
    fig.update_layout(
        barmode="stack", yaxis={"title": {"text": "seconds"}},
        updatemenus=[
            {
                "type": "buttons", "direction": "right", "x": 0, "y": 1.2, "xanchor": "left",
                "buttons": [
                    {
                        "label": "USD" if m == "usd" else m, "method": "update",
                        "args": [{"y": [values(s, m) for s in stages]}, {"yaxis.title.text": m}],
                    }
                    for m in COST_MEASURES
                ],
            }
        ],
    )  # fmt: skip
    fig.update_xaxes(type="category")
    return _html(fig, "plot-cost", 380)


def _stage_order(stage: str) -> tuple[int, str]:
    order = list(STAGE_COLORS)
    return (order.index(stage) if stage in order else len(order), stage)


def all_figures(summary: RunSummary) -> dict[str, str | None]:
    return {
        "val": val_figure(summary),
        "held_out": held_out_figure(summary),
        "heatmap": heatmap_figure(summary),
        "cost": cost_figure(summary),
    }


@cache
def plotly_bundle() -> tuple[str, str]:
    """(name, script) of the plotly.js the page loads: the cartesian bundle (CARTESIAN) when it is
    installed at the version the plotly package draws for, else the full bundle plotly ships."""
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    version = get_plotlyjs_version()
    try:
        with CARTESIAN.open(encoding="utf-8") as handle:
            header = handle.read(200)
            found = _BUNDLE_VERSION.search(header)
            if found is not None and found.group(1) == version:
                return f"cartesian-{version}", header + handle.read()
    except OSError:
        pass  # not installed (a wheel built without it): the full bundle draws the same
    return version, str(get_plotlyjs())


def plotly_script() -> str:
    """plotly.js to inline in the page (see plotly_bundle)."""
    return plotly_bundle()[1]


def plotly_version() -> str:
    """The bundle's name and version, for the URL ``view`` serves it at."""
    return plotly_bundle()[0]
