"""Per-dyno queue depth over time, one panel per routing policy (``dynosim animate``).

The seed article's animation ("a minute's worth of the simulation... each dyno represented by
a bar that's as high as its current queue of requests"), with random and intelligent routing
side by side on the same traffic: every policy runs replication 0 of the scenario from an
empty system at t = 0, with the same arrivals and service times (same seed, same streams).

Output by suffix: ``.gif`` (matplotlib, Agg, frames quantized to one shared palette by Pillow)
or ``.html`` (one self-contained file: the frames as JSON in an inline script, one canvas per
panel drawn by plain JavaScript, no external URL; the page is ``web/animate.html``, its
``@@TITLE@@`` and ``@@DATA@@`` filled in). The HTML page exposes its state on
``<body>`` for tests: ``data-frame`` (the frame drawn), ``data-frames`` (how many) and
``data-depth-sum`` (the sum of the bar heights drawn, over all panels).

Outputs are written atomically (``output.write_files``): an error, Ctrl-C or SIGTERM leaves
no half-written file and no temporary file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from . import _dynosim
from .errors import DynosimError
from .html_report import fill_page
from .output import write_files
from .scenario import Scenario

DEFAULT_POLICIES = ("random", "intelligent")
MAX_PANELS = 4
MAX_FPS = 50.0  # GIF frame delays are in 1/100 s; browsers slow down anything faster than 50 fps
MAX_FRAMES = 5000
MAX_VALUES = 2_000_000  # frames × dynos × panels: keeps the HTML (and the GIF's drawing) sane
HOLD_LAST_FRAME_S = 1.0  # the last frame stays up a little longer before the loop starts over
SUFFIXES = {".gif": "gif", ".html": "html", ".htm": "html"}

# The seed article's look: plain bars. The part of a bar above the dyno's slots is waiting.
COLOR_SERVICE = "#4c78a8"
COLOR_WAITING = "#e4572e"
COLOR_TEXT = "#222222"
COLOR_MUTED = "#666666"
# Axis labels, the same in the GIF and the HTML page.
AXIS_X = "dyno"
AXIS_Y = "requests at the dyno"


# ----------------------------------------------------------------------------- the data


@dataclass
class Panel:
    policy: str
    depth: List[List[int]]  # [frame][dyno]: requests at the dyno, in service or waiting
    router_waiting: List[int]
    arrived: List[int]  # cumulative
    queued: List[int]  # cumulative: requests that had to wait (at the router or a dyno)


@dataclass
class Movie:
    """What both outputs draw: frame times and one panel per policy."""

    scenario: str
    arrival_rate: float  # per second
    dynos: int
    slots: int
    seed: Any
    interval: float
    times: List[float]
    panels: List[Panel]

    @property
    def ymax(self) -> int:
        """The shared y-axis: the deepest queue over all frames and panels, at least 1."""
        return max([1] + [max(row) for p in self.panels for row in p.depth if row])

    @property
    def subtitle(self) -> str:
        slots = f"{self.slots} slot" + ("" if self.slots == 1 else "s")
        return (f"{self.arrival_rate * 60:,.0f} req/min, {self.dynos} dynos × {slots}, seed {self.seed}: "
                f"one replication from an empty system")

    def clock(self, frame: int) -> str:
        return f"t = {self.times[frame]:.{_decimals(self.interval)}f} s"


def simulate(scenario: Scenario, policies: Sequence[str], *, seconds: float, interval: float) -> Movie:
    """Traces every policy on the same traffic; validates all of them before running any."""
    variants = [scenario.for_policy(p).with_overrides({"run.warmup": 0, "run.duration": seconds})
                for p in policies]
    described = [json.loads(v._call(_dynosim.describe)) for v in variants]
    head = described[0]
    frames = int(math.floor(seconds / interval + 1e-9)) + 1
    values = frames * int(head["dynos"]) * len(policies)
    if values > MAX_VALUES:
        raise DynosimError(
            f"{frames:,} frames × {head['dynos']:,} dynos × {len(policies)} panels is too much to draw "
            f"({values:,} bars; at most {MAX_VALUES:,}): lower --seconds or --fps, or raise --speed"
        )
    # A hair past the last frame, so that the accumulated frame times do not drop it.
    until = (frames - 1) * interval * (1 + 1e-9) + interval * 1e-6
    panels = []
    for policy, variant in zip(policies, variants):
        trace = json.loads(variant._call(_dynosim.trace, interval, until))
        fs = trace["frames"][:frames]
        panels.append(Panel(
            policy=policy,
            depth=[[int(d) for d in f["depth"]] for f in fs],
            router_waiting=[int(f["router_waiting"]) for f in fs],
            arrived=[int(f["arrived"]) for f in fs],
            queued=[int(f["queued"]) for f in fs],
        ))
    n = min(len(p.depth) for p in panels)
    for p in panels:
        del p.depth[n:], p.router_waiting[n:], p.arrived[n:], p.queued[n:]
    return Movie(
        scenario=scenario.name,
        arrival_rate=float(head["arrival_rate"]),
        dynos=int(head["dynos"]),
        slots=int(head["slots"]),
        seed=head["seed"],
        interval=interval,
        times=[round(k * interval, 9) for k in range(n)],
        panels=panels,
    )


def counts_text(panel: Panel, frame: int) -> str:
    """``queued: 1,234 of 5,678 requests (21.7%)``, and the router's queue when not empty."""
    arrived, queued = panel.arrived[frame], panel.queued[frame]
    text = f"queued: {queued:,} of {arrived:,} requests"
    if arrived:
        text += f" ({100 * queued / arrived:.1f}%)"
    if panel.router_waiting[frame]:
        text += f"; router queue: {panel.router_waiting[frame]:,}"
    return text


def _decimals(interval: float) -> int:
    """Decimals of the clock: at least one, enough to show every frame's time exactly (max 3)."""
    for d in (1, 2):
        if abs(interval * 10**d - round(interval * 10**d)) < 1e-6:
            return d
    return 3


# ----------------------------------------------------------------------------- GIF


def write_gif(movie: Movie, path: Path, *, fps: float, width: float = 10.0, height: float = 4.0,
              dpi: int = 80) -> None:
    """An animated GIF, looping; bars updated in place (set_height) frame after frame."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator
    from matplotlib.transforms import ScaledTranslation
    from PIL import Image

    n_panels = len(movie.panels)
    rows, cols = (2, 2) if n_panels == 4 else (1, n_panels)
    if n_panels == 3:
        width *= 1.4
    if rows == 2:
        height *= 1.75
    fig = Figure(figsize=(width, height), dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    # Margins in inches: the header above, then per row a title above the axes and the tick
    # labels, "dyno" and the counts below them.
    header, title, below = 0.62, 0.26, 0.62
    row = (height - header - title - below - (rows - 1) * (title + below)) / rows
    fig.subplots_adjust(left=0.6 / width, right=1 - 0.15 / width, top=1 - (header + title) / height,
                        bottom=below / height, wspace=0.55 / ((width - 0.75) / cols),
                        hspace=(title + below) / row)
    fig.text(0.01, 1 - 0.1 / height, f"{movie.scenario}: per-dyno queues", ha="left", va="top",
             fontsize=12, fontweight="bold", color=COLOR_TEXT)
    fig.text(0.01, 1 - 0.36 / height, movie.subtitle, ha="left", va="top", fontsize=8.5, color=COLOR_MUTED)
    clock = fig.text(0.985, 1 - 0.1 / height, movie.clock(0), ha="right", va="top", fontsize=13,
                     fontweight="bold", family="monospace", color=COLOR_TEXT)
    fig.legend(handles=[Patch(color=COLOR_SERVICE, label="in service"),
                        Patch(color=COLOR_WAITING, label="waiting")],
               loc="upper right", bbox_to_anchor=(0.985, 1 - 0.34 / height), ncol=2, fontsize=8,
               frameon=False, handlelength=1.0, handleheight=0.8, borderaxespad=0, columnspacing=1.0)

    ymax = movie.ymax
    x = np.arange(1, movie.dynos + 1)
    slots = movie.slots
    depth = [np.asarray(p.depth, dtype=np.int64) for p in movie.panels]
    service_bars, waiting_bars, counts = [], [], []
    for i, panel in enumerate(movie.panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        ax.set_xlim(0.5, movie.dynos + 0.5)
        ax.set_ylim(0, ymax)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        ax.tick_params(labelsize=8, length=3, colors=COLOR_MUTED)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.grid(axis="y", color="#e6e6e6", linewidth=0.8)
        ax.set_axisbelow(True)
        ax.set_title(panel.policy, fontsize=11, fontweight="bold", color=COLOR_TEXT, loc="left", pad=4)
        ax.set_xlabel(AXIS_X, fontsize=8, color=COLOR_MUTED, labelpad=1)
        if i % cols == 0:
            ax.set_ylabel(AXIS_Y, fontsize=8, color=COLOR_MUTED)
        d0 = depth[i][0]
        # Thinner than a pixel, a snapped bar can vanish: give dense bars a hairline edge.
        dense = movie.dynos > 150
        style: Dict[str, Any] = (dict(width=1.0, linewidth=0.6, snap=False) if dense
                                 else dict(width=0.85, linewidth=0))
        served = ax.bar(x, np.minimum(d0, slots), color=COLOR_SERVICE, edgecolor=COLOR_SERVICE, **style)
        waiting = ax.bar(x, np.maximum(d0 - slots, 0), bottom=np.minimum(d0, slots), color=COLOR_WAITING,
                         edgecolor=COLOR_WAITING, **style)
        service_bars.append(list(served.patches))
        waiting_bars.append(list(waiting.patches))
        under = ax.transAxes + ScaledTranslation(0, -0.4, fig.dpi_scale_trans)
        counts.append(ax.text(0.0, 0.0, counts_text(panel, 0), transform=under, ha="left", va="top",
                              fontsize=9, color=COLOR_TEXT))

    # Blitting: the axes, ticks and titles are drawn once; each frame restores that background
    # and draws only what moves (the bars that are not empty, the clock and the counts).
    moving = [clock, *counts] + [r for bars in service_bars + waiting_bars for r in bars]
    for artist in moving:
        artist.set_animated(True)
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)

    def draw(frame: int) -> "Image.Image":
        canvas.restore_region(background)
        clock.set_text(movie.clock(frame))
        fig.draw_artist(clock)
        for i, panel in enumerate(movie.panels):
            d = depth[i][frame]
            low = np.minimum(d, slots).tolist()
            high = np.maximum(d - slots, 0).tolist()
            for rect, h in zip(service_bars[i], low):
                rect.set_height(h)
                if h:
                    fig.draw_artist(rect)
            for rect, b, h in zip(waiting_bars[i], low, high):
                rect.set_y(b)
                rect.set_height(h)
                if h:
                    fig.draw_artist(rect)
            counts[i].set_text(counts_text(panel, frame))
            fig.draw_artist(counts[i])
        return Image.fromarray(np.asarray(canvas.buffer_rgba())[:, :, :3].copy())

    n = len(movie.times)
    # One palette for every frame, taken from the busiest frame (all colours on screen).
    busiest = max(range(n), key=lambda k: sum(int(d[k].sum()) for d in depth))
    palette = draw(busiest).quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    images = [draw(k).quantize(palette=palette, dither=Image.Dither.NONE) for k in range(n)]
    delay = int(round(1000 / fps))
    durations = [delay] * n
    durations[-1] = max(delay, int(HOLD_LAST_FRAME_S * 1000))
    write_files({path: lambda tmp: images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                                                  duration=durations, loop=0, optimize=True)})


# ----------------------------------------------------------------------------- HTML


def html_data(movie: Movie, fps: float) -> Dict[str, Any]:
    """The page's data: everything its script draws."""
    return {
        "title": f"{movie.scenario}: per-dyno queues",
        "subtitle": movie.subtitle,
        "fps": fps,
        "hold": HOLD_LAST_FRAME_S,
        "interval": movie.interval,
        "decimals": _decimals(movie.interval),
        "times": movie.times,
        "dynos": movie.dynos,
        "slots": movie.slots,
        "ymax": movie.ymax,
        "colors": {"service": COLOR_SERVICE, "waiting": COLOR_WAITING},
        "axes": {"x": AXIS_X, "y": AXIS_Y},
        "panels": [
            {
                "policy": p.policy,
                "depth": p.depth,
                "router": p.router_waiting,
                "arrived": p.arrived,
                "queued": p.queued,
            }
            for p in movie.panels
        ],
    }


def render_html(movie: Movie, fps: float) -> str:
    data = json.dumps(html_data(movie, fps), separators=(",", ":"), allow_nan=False)
    # Inside <script>, "</" could end the element early; "<\/" means the same in JSON.
    data = data.replace("</", "<\\/")
    title = _escape(f"{movie.scenario}: per-dyno queues")
    return fill_page("animate.html", {"TITLE": title, "DATA": data})


def write_html(movie: Movie, path: Path, *, fps: float) -> None:
    text = render_html(movie, fps)
    write_files({path: lambda tmp: tmp.write_text(text, encoding="utf-8")})


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
