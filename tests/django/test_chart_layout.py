"""Where a chart's legend goes: at the foot of the figure, below the x-axis title, never over it."""

from types import SimpleNamespace

from leaderboard.reads import charts


def test_the_legend_hangs_from_the_foot_of_the_figure_below_the_x_axis_title():
    score = SimpleNamespace(level=1, curve=[(0.0, 1.0), (1.0, 0.5)], curve_best=[(0.0, 1.0), (1.0, 0.75)])
    layout = charts.run_fast_p_chart([score])["layout"]
    # In container coordinates, hung from the figure's bottom edge: plotly reserves the legend's
    # height in the margin and lifts the axis's ticks and title (automargin) above it. At a paper y
    # below the plot (the old -0.2 / -0.3) it was anchored by its bottom edge and covered the title.
    assert layout["legend"] == {
        "orientation": "h", "x": 0, "xanchor": "left", "xref": "container",
        "y": 0, "yanchor": "bottom", "yref": "container",
    }  # fmt: skip
    assert layout["xaxis"]["automargin"] is True and layout["xaxis"]["title"]["text"] == "p (speedup threshold)"
    assert "legend" not in charts._layout("no legend", showlegend=False)
