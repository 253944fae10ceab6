"""The HTML report in a real browser (issue #27): Debian's Chromium, driven by Playwright
(never its own browser download). The report opens with no console error and no request for
anything but itself, draws a plot per plot of its data, shows the run's numbers under the
cursor, and switches between light and dark. Skipped with a message where Chromium or
Playwright is missing; CI installs both, and there a missing one fails."""

import os
import re
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import pytest

from conftest import ROOT, SMALL_MMC, component, run_cli

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]

#: `make screenshots` sets this: the tests then refresh docs/images/.
SCREENSHOTS = os.environ.get("DYNOSIM_SCREENSHOTS") == "1"


#: Every test here drives Debian's Chromium through Playwright (tests/conftest.py: skipped
#: without them, failed under CI).
pytestmark = pytest.mark.needs("chromium", "playwright")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    path = component("chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def js_number(v: float) -> str:
    """report.js's num(): what the legend shows for a value."""
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 100:
        return f"{round(v):,}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.001:
        return f"{v:.3f}"
    raise AssertionError("not reached by these tests")


class Visit:
    """A page opened with every request recorded, and every one but the page itself refused."""

    def __init__(self, browser, url: str, *, viewport=(1100, 900), scheme=None):
        self.context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]},
                                           color_scheme=scheme)
        self.page = self.context.new_page()
        self.requests, self.errors = [], []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def route(r):
            self.requests.append(r.request.url)
            if r.request.url == url:
                r.continue_()
            else:
                r.abort()

        self.page.route("**/*", route)
        self.page.goto(url)
        self.page.wait_for_selector("html[data-ready=true]", timeout=10_000)

    def close(self):
        self.context.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser") / "compare.html"
    result = run_cli("compare", "rapgenius", "--policy", "random,intelligent", "--set", "run.replications=3",
                     "--set", "run.duration=60s", "--set", "run.warmup=10s", "--html", str(out))
    assert result.returncode == 0, result.stderr
    return out


def test_the_report_opens_with_no_error_and_no_request(browser, report):
    url = report.resolve().as_uri()
    v = Visit(browser, url)
    try:
        assert v.errors == []
        assert v.requests == [url]
        data = v.page.evaluate("JSON.parse(document.getElementById('dynosim-data').textContent)")
        lines = [p for p in data["plots"] if p["kind"] == "line"]
        heat = [p for p in data["plots"] if p["kind"] == "heatmap"]
        assert v.page.locator(".uplot").count() == len(lines)
        assert v.page.locator(".heat canvas[role=img]").count() == len(heat)
        if SCREENSHOTS:
            v.page.screenshot(path=str(ROOT / "docs" / "images" / "report.png"), full_page=False)
    finally:
        v.close()


def test_the_plots_show_the_runs_numbers_under_the_cursor(browser, report):
    v = Visit(browser, report.resolve().as_uri())
    try:
        data = v.page.evaluate("JSON.parse(document.getElementById('dynosim-data').textContent)")
        spec = next(p for p in data["plots"] if p["title"] == "Response time")
        chart = v.page.locator(".uplot").nth(data["plots"].index(spec))
        chart.scroll_into_view_if_needed()
        over = chart.locator(".u-over").bounding_box()
        legend = chart.locator(".u-legend .u-series")
        for k, tick in enumerate(spec["x"]["ticks"]):
            # The cursor snaps to the nearest percentile; the legend then holds its values.
            x = over["x"] + over["width"] * k / (len(spec["x"]["ticks"]) - 1)
            x = min(max(x, over["x"] + 1), over["x"] + over["width"] - 1)
            v.page.mouse.move(x, over["y"] + over["height"] / 2)
            assert legend.nth(0).locator(".u-value").inner_text() == tick
            shown = [legend.nth(i).locator(".u-value").inner_text() for i in range(1, legend.count())
                     if legend.nth(i).is_visible()]
            assert shown == [js_number(s["y"][k]) for s in spec["series"]]
    finally:
        v.close()


def test_light_and_dark(browser, report):
    v = Visit(browser, report.resolve().as_uri(), scheme="light")
    try:
        background = lambda: v.page.evaluate("getComputedStyle(document.body).backgroundColor")  # noqa: E731
        assert background() == "rgb(255, 255, 255)"
        v.page.click("#theme")
        assert v.page.evaluate("document.documentElement.dataset.theme") == "dark"
        assert background() != "rgb(255, 255, 255)"
        assert v.page.locator(".uplot").count() > 0 and v.errors == []
    finally:
        v.close()
    dark = Visit(browser, report.resolve().as_uri(), scheme="dark")
    try:
        assert dark.page.evaluate("getComputedStyle(document.body).backgroundColor") != "rgb(255, 255, 255)"
    finally:
        dark.close()


def test_readable_on_a_phone(browser, report):
    v = Visit(browser, report.resolve().as_uri(), viewport=(390, 844))
    try:
        # Nothing wider than the screen but the table, which scrolls in its own box.
        width = v.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390
        font = float(re.match(r"[\d.]+", v.page.evaluate("getComputedStyle(document.body).fontSize")).group())
        assert font >= 14
    finally:
        v.close()


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """A report of each command that has --html, from small runs."""
    folder = tmp_path_factory.mktemp("reports")
    (folder / "mmc.toml").write_text(SMALL_MMC)
    logs = ROOT / "tests" / "fixtures" / "logs" / "heroku.log"
    commands = {
        "capacity": ["capacity", "mmc.toml", "--policy", "intelligent,random", "--target", "queue.mean <= 10ms"],
        "sweep": ["sweep", "mmc.toml", "--vary", "fleet.dynos=6,8,12", "--vary", "router.policy=intelligent,random",
                  "--out", "sweep"],
        "ramp": ["ramp", "mmc.toml", "--rates", "20..60/20", "--duration", "30s"],
        "tune": ["tune", "mmc.toml", "--vary", "fleet.dynos=5,6,8", "--target", "queue.mean <= 10ms"],
        "logs summary": ["logs", "summary", str(logs)],
        "run, autoscaled": ["run", "autoscale-day", "--set", "run.replications=2", "--set", "run.duration=2h"],
    }
    out = {}
    for name, args in commands.items():
        path = folder / (name.replace(" ", "-").replace(",", "") + ".html")
        result = run_cli(*args, "--html", str(path), cwd=folder)
        assert result.returncode == 0, result.stderr
        out[name] = path
    return out


@pytest.mark.parametrize("command", ["capacity", "sweep", "ramp", "tune", "logs summary", "run, autoscaled"])
def test_every_commands_report_opens_cleanly(browser, reports, command):
    url = reports[command].resolve().as_uri()
    v = Visit(browser, url)
    try:
        assert v.errors == [] and v.requests == [url]
        data = v.page.evaluate("JSON.parse(document.getElementById('dynosim-data').textContent)")
        assert v.page.locator(".uplot").count() == sum(p["kind"] == "line" for p in data["plots"]) > 0
        # Each plot drew its lines: uPlot's data holds every series' values as given.
        for i, spec in enumerate(p for p in data["plots"] if p["kind"] == "line"):
            chart = v.page.locator(".uplot").nth(i)
            assert chart.locator(".u-legend .u-series").count() >= len(spec["series"]) + 1
    finally:
        v.close()



@pytest.fixture(scope="module")
def day_report(tmp_path_factory):
    """The built-in day (a tenth of its traffic, one replication): its time axes span 24 h."""
    out = tmp_path_factory.mktemp("day") / "day.html"
    light = ["run.replications=1", 'arrivals.rate={mean = "2.5/s", amplitude = "2/s", period = "24h", peak = "15h"}']
    result = run_cli("run", "autoscale-day", *[a for o in light for a in ("--set", o)], "--html", str(out))
    assert result.returncode == 0, result.stderr
    return out


def test_a_day_long_runs_time_axes_read_as_a_clock(browser, day_report, report):
    """uPlot draws the ticks time_axis.py chooses, labelled as it labels them (issue #34); a
    minute-long run's time axis keeps seconds."""
    from dynosim import time_axis

    v = Visit(browser, day_report.resolve().as_uri())
    try:
        assert v.errors == []
        data = v.page.evaluate("JSON.parse(document.getElementById('dynosim-data').textContent)")
        lines = [p for p in data["plots"] if p["kind"] == "line"]
        drawn = v.page.evaluate("window.dynosimPlots.xLabels()")
        assert len(drawn) == len(lines)
        timed = [i for i, p in enumerate(lines) if p["x"].get("clock")]
        assert len(timed) == 3
        for i in timed:
            xs = [x for x in lines[i]["x"]["values"] if x is not None]
            expected = [time_axis.label(t) for t in time_axis.ticks(min(xs), max(xs))]
            assert expected == ["00:00", "06:00", "12:00", "18:00", "24:00"]
            assert drawn[i] == expected
        # The heat maps' time labels and the legend under the cursor say the same.
        axis = v.page.locator(".heat .scale span").all_inner_texts()
        assert axis[:1] == ["t = 00:00"] and axis[2] == "t = 24:00"
        chart = v.page.locator(".uplot").nth(timed[0])
        chart.scroll_into_view_if_needed()
        over = chart.locator(".u-over").bounding_box()
        v.page.mouse.move(over["x"] + over["width"] * 0.5, over["y"] + over["height"] / 2)
        shown = chart.locator(".u-legend .u-series").nth(0).locator(".u-value").inner_text()
        assert re.fullmatch(r"1[12]:\d\d(:\d\d)?", shown), shown
    finally:
        v.close()
    short = Visit(browser, report.resolve().as_uri())
    try:
        data = short.page.evaluate("JSON.parse(document.getElementById('dynosim-data').textContent)")
        lines = [p for p in data["plots"] if p["kind"] == "line"]
        drawn = short.page.evaluate("window.dynosimPlots.xLabels()")
        waiting = next(i for i, p in enumerate(lines) if p["title"] == "Requests waiting")
        assert lines[waiting]["x"]["label"] == "time (s)"
        assert drawn[waiting] and all(re.fullmatch(r"[\d,]+(\.\d+)?", t) for t in drawn[waiting] if t)
    finally:
        short.close()


# --- the playground ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def playground():
    """`dynosim serve` on a free loopback port; stopped (Ctrl-C) after the module."""
    import signal
    import subprocess
    import sys

    from conftest import end_process

    proc = subprocess.Popen([sys.executable, "-m", "dynosim", "serve", "rapgenius", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, proc.stderr.read()
        yield "http://" + line.split("http://", 1)[1].split("/", 1)[0]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        finally:
            end_process(proc)


class Page:
    """The playground in a browser: every request recorded; any not to the server refused."""

    def __init__(self, browser, base: str, url: str = "", viewport=(1300, 900)):
        self.context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        self.page = self.context.new_page()
        self.requests, self.errors = [], []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def route(r):
            self.requests.append(r.request.url)
            if r.request.url.startswith(base + "/"):
                r.continue_()
            else:
                r.abort()

        self.page.route("**/*", route)
        self.page.goto(url or base + "/")

    def runs(self) -> int:
        return int(self.page.evaluate("document.documentElement.dataset.runs || 0"))

    def wait_runs(self, n: int) -> None:
        self.wait(f"Number(document.documentElement.dataset.runs || 0) >= {n}")

    def wait(self, expression: str, timeout: float = 30.0) -> None:
        """Polls `expression` in the page until it is true (wait_for_function would evaluate
        a string, which the page's Content-Security-Policy forbids, rightly)."""
        import time

        end = time.monotonic() + timeout
        while not self.page.evaluate(expression):
            if time.monotonic() > end:
                raise AssertionError(f"still false after {timeout} s: {expression}")
            self.page.wait_for_timeout(50)

    def cell(self, row: int, column: str) -> str:
        headers = [h.inner_text().replace("\n", " ") for h in self.page.locator("#results section.table thead th").all()]
        index = next(i for i, h in enumerate(headers) if h.startswith(column))
        return self.page.locator("#results section.table tbody tr").nth(row).locator("td").nth(index).inner_text()

    def close(self):
        self.context.close()


@pytest.mark.needs("starlette", "uvicorn")
def test_the_playground_loads_and_follows_its_controls(browser, playground):
    p = Page(browser, playground)
    try:
        p.wait_runs(1)
        # rapgenius compares random and intelligent routing.
        assert p.cell(0, "dynos") == "75" and [p.cell(i, "policy") for i in range(2)] == ["random", "intelligent"]
        assert p.page.locator("#results .uplot").count() >= 3
        # A control moves: the table follows (the run is timed in docs/report.md, not here).
        p.page.fill('[data-key="fleet.dynos"]', "90")
        p.wait_runs(2)
        p.wait("document.querySelector('#results section.table tbody td:nth-child(2)').innerText === '90'")
        # Policies side by side, on the same traffic.
        p.page.check('input[data-policy="least_connections"]')
        p.wait_runs(3)
        p.wait("document.querySelectorAll('#results section.table tbody tr').length === 3")
        assert [p.cell(i, "policy") for i in range(3)] == ["random", "least_connections", "intelligent"]
        assert p.errors == []
        assert all(u.startswith(playground + "/") for u in p.requests)
        if SCREENSHOTS:
            p.page.screenshot(path=str(ROOT / "docs" / "images" / "playground.png"))
    finally:
        p.close()


@pytest.mark.needs("starlette", "uvicorn")
def test_a_bad_toml_shows_the_clis_message_on_its_line(browser, playground):
    p = Page(browser, playground)
    try:
        p.wait_runs(1)
        p.page.click("#editor-box summary")
        text = p.page.input_value("#editor")
        bad = text.replace("dynos = 75", "dynos = -2")
        line = bad.splitlines().index(next(l for l in bad.splitlines() if "dynos = -2" in l)) + 1
        p.page.fill("#editor", bad)
        p.page.wait_for_selector("#error:not([hidden])", timeout=30_000)
        message = p.page.inner_text("#error")
        assert message.startswith(f"line {line}: ") and "fleet.dynos" in message
        assert p.page.get_attribute("#editor", "data-error-line") == str(line)
        # Put right, the error goes.
        p.page.fill("#editor", text)
        p.page.wait_for_selector("#error", state="hidden", timeout=30_000)
    finally:
        p.close()


@pytest.mark.needs("starlette", "uvicorn")
def test_the_url_holds_the_state(browser, playground):
    p = Page(browser, playground)
    try:
        p.wait_runs(1)
        p.page.fill('[data-key="fleet.dynos"]', "120")
        p.page.uncheck('input[data-policy="random"]')
        p.wait("document.querySelectorAll('#results section.table tbody tr').length === 1")
        url = p.page.url
        assert "#state=" in url
        table = p.page.inner_text("#results section.table tbody")
    finally:
        p.close()
    again = Page(browser, playground, url)
    try:
        again.wait_runs(1)
        assert again.page.input_value('[data-key="fleet.dynos"]') == "120"
        assert again.page.is_checked('input[data-policy="intelligent"]')
        assert not again.page.is_checked('input[data-policy="random"]')
        assert again.page.inner_text("#results section.table tbody") == table  # same seed, same scenario: same figures
    finally:
        again.close()


@pytest.mark.needs("starlette", "uvicorn")
def test_an_opened_file_and_the_downloads_give_the_toml_and_the_report(browser, playground, tmp_path):
    p = Page(browser, playground)
    try:
        p.wait_runs(1)
        mine = (ROOT / "python" / "dynosim" / "scenarios" / "rapgenius.toml").read_text()
        mine = mine.replace('name = "rapgenius"', 'name = "mine"').replace("dynos = 75", "dynos = 80")
        p.page.set_input_files("#upload", files=[{"name": "mine.toml", "mimeType": "text/plain",
                                                  "buffer": mine.encode()}])
        p.wait("document.getElementById('words').innerText.startsWith('mine:')")
        assert p.cell(0, "dynos") == "80"
        with p.page.expect_download() as d:
            p.page.click("#download-toml")
        toml = tomllib.loads(open(d.value.path(), encoding="utf-8").read())
        assert toml["name"] == "mine" and toml["fleet"]["dynos"] == 80
        with p.page.expect_download(timeout=60_000) as d:
            p.page.click("#download-report")
        report = open(d.value.path(), encoding="utf-8").read()
        assert "dynosim-data" in report and "default-src 'none'" in report and "80 standard-1x dynos" in report
    finally:
        p.close()


def test_a_page_waiting_for_the_server_shows_its_place_in_line(browser):
    """A server with room for one run (issue 34): while another client's long run holds it, the
    page's run waits and says so, its place in line; it runs once that one is gone."""
    pytest.importorskip("starlette", reason="the 'ui' extra is not installed (pip install 'dynosim[ui]')")
    import json
    import signal
    import subprocess
    import threading
    import time
    import urllib.error
    import urllib.request

    from conftest import end_process

    proc = subprocess.Popen([sys.executable, "-m", "dynosim", "serve", "rapgenius", "--port", "0", "--max-runs", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    toml = (ROOT / "python" / "dynosim" / "scenarios" / "rapgenius.toml").read_text()

    def post(settings, client):
        request = urllib.request.Request(base + "/api/run", method="POST",
                                         data=json.dumps({"toml": toml, "set": settings}).encode(),
                                         headers={"Content-Type": "application/json", "X-Dynosim-Client": client})
        try:
            with urllib.request.urlopen(request, timeout=300) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def status():
        with urllib.request.urlopen(base + "/api/status", timeout=30) as r:
            return json.loads(r.read())

    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, proc.stderr.read()
        base = "http://" + line.split("http://", 1)[1].split("/", 1)[0]
        answers = []
        long = {"fleet.dynos": 100000, "arrivals.rate": "50000/s", "run.duration": "7min", "run.warmup": "0s",
                "run.replications": 2}
        holder = threading.Thread(target=lambda: answers.append(post(long, "someone-else")))
        holder.start()
        end = time.monotonic() + 60
        while status()["runs"] < 1:
            assert time.monotonic() < end, "the long run did not start"
            time.sleep(0.05)
        p = Page(browser, base)
        try:
            p.wait("document.getElementById('state').innerText.includes('1st in line')")
            assert p.runs() == 0
            # The other client asks again, for a short run: its long one is cancelled, the page's
            # run goes next, then that one.
            assert post({"run.duration": "60s", "run.replications": 2}, "someone-else") == 200
            p.wait_runs(1)
            assert p.cell(0, "dynos") == "75" and p.errors == []
        finally:
            p.close()
        holder.join(timeout=120)
        assert answers == [409]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        finally:
            end_process(proc)
