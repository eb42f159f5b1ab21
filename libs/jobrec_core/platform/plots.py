"""Figures for the reports and MLflow: headless matplotlib, one look for every chart."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal


@contextmanager
def chart(
    size: tuple[float, float],
    title: str,
    ylim: tuple[float, float],
    grid: Literal["both", "x", "y"] = "both",
) -> Iterator[tuple[Any, Any]]:
    """(figure, axis) to draw on; on exit the common finish (limits, grid, legend, title,
    layout) and the figure is closed, so drawing many never accumulates open figures."""
    import matplotlib

    matplotlib.use("Agg")  # no display on executors, CI or clusters
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=size)
    yield figure, axis
    axis.set_ylim(*ylim)
    axis.grid(alpha=0.3, axis=grid)
    axis.legend(loc="lower right")
    axis.set_title(title)
    figure.tight_layout()
    plt.close(figure)
