"""`dynosim animate`: per-dyno queue depth over time, one panel per routing policy, written
as a GIF or a self-contained HTML page (the simulation and drawing are :mod:`dynosim.animate`'s)."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import List

from ..animate import (DEFAULT_POLICIES, MAX_FPS, MAX_FRAMES, MAX_PANELS, SUFFIXES, Movie, simulate, write_gif,
                       write_html)
from ..errors import DynosimError
from .common import add_scenario_arguments, policy_list, positive_number, scenario_from_args

DESCRIPTION = (
    "Animate per-dyno queue depth, one bar per dyno as in the Rap Genius article: random and "
    "intelligent routing side by side on the same traffic, with a clock and running counts of "
    "queued requests. Writes a GIF or a self-contained HTML page (by the suffix of --out)."
)


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "animate",
        help="Animate per-dyno queues, random and intelligent side by side.",
        description=DESCRIPTION,
    )
    add_scenario_arguments(p)
    p.add_argument("--out", required=True, metavar="FILE",
                   help="output file: FILE.gif (an animated GIF) or FILE.html (a self-contained page)")
    p.add_argument("--policy", type=_policies, default=list(DEFAULT_POLICIES), metavar="P1,P2",
                   help=f"routing policies, one panel each, up to {MAX_PANELS} (default: random,intelligent)")
    p.add_argument("--seconds", type=positive_number, default=60.0, metavar="S",
                   help="simulated seconds to show, from an empty system (default: 60)")
    p.add_argument("--fps", type=positive_number, default=10.0,
                   help=f"frames per second of the output, at most {MAX_FPS:g} (default: 10)")
    p.add_argument("--speed", type=positive_number, default=4.0,
                   help="simulated seconds per real second (default: 4: a minute in 15 s); "
                        "a frame every speed/fps simulated seconds")
    p.set_defaults(handler=main)


def _policies(text: str) -> List[str]:
    names = policy_list(text)
    if len(names) > MAX_PANELS:
        raise argparse.ArgumentTypeError(f"at most {MAX_PANELS} policies (one panel each), got {len(names)}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a policy is named twice in {text!r}")
    return names


@dataclass(frozen=True)
class Options:
    out: Path
    kind: str  # "gif" or "html"
    policies: List[str]
    seconds: float
    fps: float
    speed: float

    @property
    def interval(self) -> float:
        """Simulated seconds between two frames."""
        return self.speed / self.fps

    @property
    def frames(self) -> int:
        return int(math.floor(self.seconds / self.interval + 1e-9)) + 1


def options_from_args(args: argparse.Namespace) -> Options:
    """Checks every option of the command; raises DynosimError on the first mistake."""
    if args.duration is not None:
        raise DynosimError("--duration does not apply to animate: use --seconds (simulated seconds shown)")
    if args.replications is not None:
        raise DynosimError("--replications does not apply to animate: it shows one replication")
    out = Path(args.out)
    kind = SUFFIXES.get(out.suffix.lower())
    if kind is None:
        raise DynosimError(f"--out: expected a file name ending in .gif or .html, got {args.out!r}")
    if out.is_dir():
        raise DynosimError(f"--out: {args.out} is a directory; expected a file name ending in {out.suffix}")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise DynosimError(f"--out: no such directory: {parent}")
    if args.fps > MAX_FPS:
        raise DynosimError(f"--fps: at most {MAX_FPS:g} frames per second, got {args.fps:g}")
    opts = Options(out=out, kind=kind, policies=list(args.policy), seconds=args.seconds,
                   fps=args.fps, speed=args.speed)
    if opts.frames < 2:
        raise DynosimError(
            f"--seconds {opts.seconds:g} gives a single frame: at --speed {opts.speed:g} and --fps "
            f"{opts.fps:g} a frame shows every {opts.interval:g} simulated seconds"
        )
    if opts.frames > MAX_FRAMES:
        raise DynosimError(
            f"--seconds {opts.seconds:g} at --speed {opts.speed:g} and --fps {opts.fps:g} makes "
            f"{opts.frames:,} frames; at most {MAX_FRAMES:,} (raise --speed or lower --fps)"
        )
    return opts


def main(args: argparse.Namespace) -> int:
    opts = options_from_args(args)
    scenario = scenario_from_args(args)
    movie = simulate(scenario, opts.policies, seconds=opts.seconds, interval=opts.interval)
    if opts.kind == "gif":
        write_gif(movie, opts.out, fps=opts.fps)
    else:
        write_html(movie, opts.out, fps=opts.fps)
    print(written(opts.out, movie, opts.fps))
    return 0


def written(path: Path, movie: Movie, fps: float) -> str:
    """``wrote queues.gif: 151 frames (60 simulated s at 10 fps, 2 panels), 1.2 MB``."""
    size = path.stat().st_size
    shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{max(1, round(size / 1e3))} kB"
    panels = len(movie.panels)
    return (f"wrote {path}: {len(movie.times):,} frames ({movie.times[-1]:g} simulated s at {fps:g} fps, "
            f"{panels} panel{'s' if panels > 1 else ''}), {shown}")
