"""`dynosim animate`: the GIF and the HTML page really animate (the HTML one in headless
Chromium), and bad options fail before anything runs, leaving no file behind."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_one_line_error, component, run_process
from PIL import Image, ImageChops


# As on this project's machines (.library/env/machines/polyglot.md): root needs --no-sandbox,
# and the background-networking flags keep Chromium off the (closed) network.
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
WAITING_RGB = (0xE4, 0x57, 0x2E)  # animate.COLOR_WAITING: the part of a bar that waits
SERVICE_RGB = (0x4C, 0x78, 0xA8)  # animate.COLOR_SERVICE




def chromium() -> str:
    return component("chromium")


def dump_dom(page: Path, budget_ms: int, profile: Path) -> str:
    """The page's DOM after `budget_ms` of virtual time (timers run, the page plays)."""
    result = run_process(  # a browser starts helpers: its whole group ends with the test
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
         f"--virtual-time-budget={budget_ms}", page.resolve().as_uri()],
        text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def body_state(dom: str) -> dict:
    body = re.search(r"<body\b[^>]*>", dom)
    assert body, dom[:2000]
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(0)))
    return {k: int(v) if re.fullmatch(r"-?\d+", v) else v for k, v in attrs.items()}


def page_data(text: str) -> dict:
    found = re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S)
    assert found
    return json.loads(found.group(1))


def color_pixels(image: Image.Image, rgb, tolerance: int = 16, below: float = 0.0) -> int:
    """Pixels of about that colour, in the part of the image below `below` × its height."""
    px = np.asarray(image.convert("RGB"), dtype=np.int16)
    px = px[int(below * px.shape[0]):]
    return int((np.abs(px - np.array(rgb, dtype=np.int16)).max(axis=2) <= tolerance).sum())


def test_gif_has_frames_and_the_bars_move(cli, tmp_path):
    result = cli("animate", "--out", "queues.gif", "--seconds", "10", "--fps", "5", "--speed", "5",
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # One line saying what was written (it used to print nothing).
    size = (tmp_path / "queues.gif").stat().st_size
    assert result.stdout.startswith("wrote queues.gif: 11 frames") and result.stdout.count("\n") == 1
    assert ("MB" if size >= 1e6 else "kB") in result.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["queues.gif"]  # no temporary file left
    with Image.open(tmp_path / "queues.gif") as gif:
        assert gif.format == "GIF"
        # 10 simulated seconds, a frame every 5/5 = 1 s: t = 0, 1, ..., 10.
        assert gif.n_frames == 11
        assert gif.info.get("loop") == 0
        frames = []
        for k in range(gif.n_frames):
            gif.seek(k)
            frames.append(gif.convert("RGB"))
    assert gif.size[0] >= 600
    # Below the header (its legend has both colours). t = 0: an empty system, no bars at all.
    # Later: bars, some with a waiting part (random routing).
    service = [color_pixels(f, SERVICE_RGB, below=0.2) for f in frames]
    waiting = [color_pixels(f, WAITING_RGB, below=0.2) for f in frames]
    assert service[0] == waiting[0] == 0
    assert min(service[2:]) > 0 and max(waiting) > 0
    # The bars move: the area drawn changes from frame to frame, not just the clock.
    assert len(set(service[2:])) > 3, service
    assert len(set(waiting[2:])) > 3, waiting
    diff = ImageChops.difference(frames[4], frames[8]).getbbox()
    assert diff is not None and diff[3] > gif.size[1] // 2, diff


@pytest.mark.needs("chromium")
def test_html_page_plays_in_a_headless_browser(cli, tmp_path):
    result = cli("animate", "--out", "queues.html", "--seconds", "20", "--fps", "10", "--speed", "2",
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = tmp_path / "queues.html"
    text = page.read_text(encoding="utf-8")
    # Self-contained: works offline, fetches nothing.
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I)
    assert not re.search(r"<(link|img|iframe)\b|\bsrc\s*=", text, re.I)
    data = page_data(text)
    frames = len(data["times"])
    assert frames == 101  # 20 s, a frame every 2/10 = 0.2 s
    assert [p["policy"] for p in data["panels"]] == ["random", "intelligent"]

    # At 10 fps, 1.5 s and 4 s of (virtual) time are frames 15 and 40, give or take.
    early = body_state(dump_dom(page, 1500, tmp_path / "profile-1"))
    late = body_state(dump_dom(page, 4000, tmp_path / "profile-2"))
    assert early["frames"] == late["frames"] == frames
    assert 0 < early["frame"] < late["frame"] < frames, (early, late)
    # The axes are labelled as in the GIF (the page used to have no axis labels).
    assert late["axes"] == "dyno|requests at the dyno"

    def drawn_sum(k: int) -> int:
        return sum(sum(p["depth"][k]) for p in data["panels"])

    # What the page says it drew is the data of the frame it is on...
    assert early["depth-sum"] == drawn_sum(early["frame"])
    assert late["depth-sum"] == drawn_sum(late["frame"])
    # ... and the bars moved between the two.
    assert early["depth-sum"] != late["depth-sum"], (early, late)


@pytest.mark.needs("chromium")
def test_html_screenshot_is_not_blank(cli, tmp_path):
    """The canvases really have bars painted on them (not only numbers in data attributes)."""
    assert cli("animate", "--out", "q.html", "--seconds", "20", "--fps", "10", "--speed", "2",
               cwd=tmp_path).returncode == 0
    shot = tmp_path / "shot.png"
    result = run_process(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={shot}", "--window-size=1200,700", "--virtual-time-budget=3000",
         (tmp_path / "q.html").as_uri()],
        text=True, timeout=120,
    )
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    with Image.open(shot) as image:
        assert color_pixels(image, SERVICE_RGB, tolerance=10, below=0.2) > 500
        assert color_pixels(image, WAITING_RGB, tolerance=10, below=0.2) > 500


def test_html_escapes_the_scenario_text(cli, tmp_path):
    result = cli("animate", "--out", "q.html", "--seconds", "2", "--set", 'name="a</script><b>x"',
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "q.html").read_text(encoding="utf-8")
    assert text.count("</script>") == 2  # only the two script elements' own end tags
    assert page_data(text)["title"].startswith("a</script><b>x")


def test_bad_out_suffix_is_one_line_and_writes_nothing(cli, tmp_path):
    result = cli("animate", "--out", "queues.mp4", cwd=tmp_path)
    assert_one_line_error(result, "--out", ".gif or .html", "queues.mp4")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--out", "q"], [".gif or .html"]),
        (["--out", "missing/q.gif"], ["no such directory", "missing"]),
        (["--out", "q.gif", "--fps", "0"], ["--fps", "positive"]),
        (["--out", "q.gif", "--fps", "100"], ["--fps", "at most 50"]),
        (["--out", "q.gif", "--speed", "nan"], ["--speed", "positive"]),
        (["--out", "q.gif", "--seconds", "-5"], ["--seconds", "positive"]),
        (["--out", "q.gif", "--seconds", "0.2"], ["--seconds", "single frame"]),
        (["--out", "q.gif", "--seconds", "100000"], ["frames", "at most"]),
        (["--out", "q.gif", "--policy", "random,smart"], ["--policy", "unknown policy 'smart'"]),
        (["--out", "q.gif", "--policy", "random,random"], ["--policy", "twice"]),
        (["--out", "q.gif", "--policy", "random,round_robin,power_of_d,least_connections,intelligent"],
         ["--policy", "at most 4"]),
        (["--out", "q.gif", "--duration", "10s"], ["--duration", "--seconds"]),
        (["--out", "q.gif", "--replications", "3"], ["--replications", "one replication"]),
        (["--out", "q.gif", "--set", "fleet.dynos=0"], ["--set: fleet.dynos:", "whole number"]),
        (["nosuch.toml", "--out", "q.gif"], ["nosuch.toml"]),
    ],
)
def test_bad_options_fail_before_running(cli, tmp_path, args, fragments):
    result = cli("animate", *args, cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    assert list(tmp_path.iterdir()) == []


def test_out_is_required(cli, tmp_path):
    assert_one_line_error(cli("animate", cwd=tmp_path), "--out")


def test_unstable_scenario_exits_3_and_keeps_the_old_file(cli, tmp_path):
    out = tmp_path / "q.gif"
    out.write_bytes(b"previous")
    result = cli("animate", "--out", "q.gif", "--set", "fleet.dynos=30", cwd=tmp_path)
    assert_one_line_error(result, "unstable", code=3)
    assert out.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["q.gif"]


def test_same_seed_same_animation(tmp_path):
    from dynosim import Scenario
    from dynosim.animate import simulate

    s = Scenario.load("rapgenius")
    a = simulate(s, ["random", "intelligent"], seconds=5, interval=0.5)
    b = simulate(s, ["random", "intelligent"], seconds=5, interval=0.5)
    c = simulate(s.with_overrides({"run.seed": 7}), ["random"], seconds=5, interval=0.5)
    assert a.times == [k * 0.5 for k in range(11)]
    assert [p.depth for p in a.panels] == [p.depth for p in b.panels]
    assert a.panels[0].depth != c.panels[0].depth
    # Both policies see the same traffic; intelligent never puts two requests on a 1-slot dyno.
    assert a.panels[0].arrived == a.panels[1].arrived
    assert max(max(row) for row in a.panels[1].depth) <= 1
    assert a.panels[1].queued[-1] <= a.panels[0].queued[-1]
