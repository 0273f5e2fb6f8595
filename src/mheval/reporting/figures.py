"""Plots for the report, as PNG data URIs (the report is one file that opens from disk).

Figures are drawn with matplotlib's object API (a `Figure` renders with Agg, no pyplot state, no
display). Chinese category names need a CJK font: the first one found among known families is
registered with matplotlib's font manager and used as a fallback after DejaVu Sans; without one the
plots use the English names only, so no tick label turns into empty boxes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

import base64
import functools
import io
import math
import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from mheval.labels import CRISIS_LABELS, CRISIS_TRIAGE
from mheval.reporting.rundata import label_name

# Families the HTML's CSS and the plots look for, best first.
CJK_FAMILIES: tuple[str, ...] = (
    "WenQuanYi Micro Hei",
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
)
CJK_FONT_FILES: tuple[str, ...] = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
)
DPI = 110


@functools.cache
def cjk_font() -> str | None:
    """The family name of a CJK font registered with matplotlib, or None when there is none."""
    from matplotlib import font_manager

    for path in CJK_FONT_FILES:
        if Path(path).is_file():
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):
                continue
    names = {f.name for f in font_manager.fontManager.ttflist}
    return next((family for family in CJK_FAMILIES if family in names), None)


def _rc() -> dict[RcKeyType, Any]:
    families = ["DejaVu Sans"]
    if cjk_font():
        families.append(str(cjk_font()))
    return {"font.family": families, "font.size": 9, "axes.titlesize": 10, "svg.fonttype": "path"}


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _data_uri(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
PLOT_TEXT_MAX = 48


def plot_text(value: object, limit: int = PLOT_TEXT_MAX) -> str:
    """A name from the data as a plot label: short, no control characters, `$` shown as itself.

    Matplotlib reads text between two `$` as mathematical notation (and raises on bad notation), so a
    model named `a$b$` would stop the report; escaped, it is drawn literally.
    """
    text = _CONTROL.sub("\ufffd", str(value))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("$", r"\$")


def category_tick(category: str) -> str:
    """Tick label: the English name wrapped, then the Chinese name when a CJK font can draw it."""
    if category not in CRISIS_LABELS:
        return plot_text(category)
    en = "\n".join(textwrap.wrap(label_name(CRISIS_TRIAGE, category, "en"), 16))
    if cjk_font():
        return f"{en}\n{label_name(CRISIS_TRIAGE, category, 'zh')}"
    return en


def heatmap(
    frame: pd.DataFrame,
    value: str,
    *,
    title: str,
    vmin: float,
    vmax: float,
    cmap: str,
    fmt: str = "{:.2f}",
    row_label: str = "model",
) -> str | None:
    """Rows x categories coloured by `value`, each cell annotated with the value and its n."""
    import matplotlib as mpl

    if frame.empty:
        return None
    rows = list(dict.fromkeys(frame[row_label]))
    cols = list(dict.fromkeys(frame["category"]))
    grid = np.full((len(rows), len(cols)), np.nan)
    ns = np.zeros((len(rows), len(cols)), dtype=int)
    for r in frame.itertuples(index=False):
        i, k = rows.index(getattr(r, row_label)), cols.index(r.category)
        v = getattr(r, value)
        grid[i, k] = np.nan if v is None or (isinstance(v, float) and math.isnan(v)) else v
        ns[i, k] = int(r.n)
    with mpl.rc_context(_rc()):
        fig = _figure(max(5.5, 1.1 * len(cols) + 2.8), 0.55 * len(rows) + 2.1)
        ax = fig.add_subplot()
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        ticks = ["all categories" if c == "all" else category_tick(c) for c in cols]
        ax.set_xticks(range(len(cols)), ticks, rotation=0, fontsize=7.5)
        if "all" in cols and len(cols) > 1:  # set the pooled column apart from the categories
            ax.axvline(cols.index("all") - 0.5, color="#fff", linewidth=4)
        ax.set_yticks(range(len(rows)), [plot_text(r) for r in rows])
        ax.tick_params(length=0)
        norm = mpl.colors.Normalize(vmin, vmax)
        colormap = mpl.colormaps[cmap]
        for i in range(len(rows)):
            for k in range(len(cols)):
                if np.isnan(grid[i, k]):
                    ax.text(k, i, "–", ha="center", va="center", color="#777")
                    continue
                shade = colormap(norm(grid[i, k]))
                light = 0.299 * shade[0] + 0.587 * shade[1] + 0.114 * shade[2] > 0.55
                ax.text(
                    k,
                    i,
                    f"{fmt.format(grid[i, k])}\nn={ns[i, k]}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="#111" if light else "#fff",
                )
        ax.set_title(title, loc="left")
        fig.colorbar(image, ax=ax, shrink=0.9, pad=0.01)
        return _data_uri(fig)


def interval_bars(
    frame: pd.DataFrame,
    *,
    item: str,
    item_label: str,
    value: str,
    title: str,
    xlim: tuple[float, float],
    xlabel: str,
    group: str = "model",
) -> str | None:
    """Horizontal grouped bars (one group per item, one bar per model) with their 95% intervals."""
    import matplotlib as mpl

    if frame.empty:
        return None
    items = list(dict.fromkeys(frame[item]))
    labels = [frame.loc[frame[item] == i, item_label].iloc[0] for i in items]
    groups = list(dict.fromkeys(frame[group]))
    height = 0.8 / max(1, len(groups))
    with mpl.rc_context(_rc()):
        fig = _figure(8.0, 0.26 * len(items) * max(1, len(groups)) + 1.3)
        ax = fig.add_subplot()
        colors = mpl.colormaps["tab10"]
        for g_index, g in enumerate(groups):
            sub = frame[frame[group] == g].set_index(item)
            ys, xs, lo, hi = [], [], [], []
            for i_index, i in enumerate(items):
                if i not in sub.index or pd.isna(sub.at[i, value]):
                    continue
                ys.append(i_index + (g_index - (len(groups) - 1) / 2) * height)
                v = float(sub.at[i, value])
                xs.append(v)
                low, high = sub.at[i, f"{value}_low"], sub.at[i, f"{value}_high"]
                # Never negative: a bound a rounding error beyond its point would stop matplotlib.
                lo.append(max(0.0, v - float(low)) if pd.notna(low) else 0.0)
                hi.append(max(0.0, float(high) - v) if pd.notna(high) else 0.0)
            ax.barh(ys, xs, height=height * 0.9, color=colors(g_index % 10), label=plot_text(g))
            ax.errorbar(xs, ys, xerr=[lo, hi], fmt="none", ecolor="#222", elinewidth=1, capsize=2)
        ax.set_yticks(range(len(items)), [plot_text(x) for x in labels])
        ax.invert_yaxis()
        ax.set_xlim(*xlim)
        ax.set_xlabel(xlabel)
        ax.grid(axis="x", color="#ddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_title(title, loc="left")
        if len(groups) > 1:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        return _data_uri(fig)


__all__ = ["CJK_FAMILIES", "category_tick", "cjk_font", "heatmap", "interval_bars", "plot_text"]
