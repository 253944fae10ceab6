"""The README and the pages of docs/ as a user follows them.

Every `dynosim ...` line (or `.venv/bin/dynosim ...`: the test runs its own environment's) of
a ```console or ```bash block of README.md and docs/*.md runs, in the order its page shows it,
and must exit 0 with some output; README's tour starts from `dynosim init`; README's tables
name every policy and distribution, its Python snippet and scenario run; output.md names every
metric a run writes; every relative link leads to a file (and heading) that exists. A usage
synopsis (`dynosim logs summary FILE... [--json]`) is not a command: pages write those in
```text blocks.

A page's commands share one scratch folder, as a reader's shell would (a file one writes, a
later one reads), which holds `tests/fixtures` and `bench` (links): pages name the
repository's fixtures and benchmark scenarios from its root, where a reader runs them.
Beyond that, the only liberties taken are these, each with its reason:

- A ```toml block whose first line names a file (`# fleet.toml: ...`) is that file: the page's
  folder gets it before the page runs, as a reader saves it before the commands that follow.
- FILES: a file a page names as the reader's own (their scenario, their log) is put in the
  folder before the page runs, unless the page makes it itself (`dynosim init FILE`).
- SHORTENED: a documented command that would run for long gets the options its entry gives
  appended (a later option wins), so that the whole runs in seconds; an entry that matches no
  documented command fails, so the table cannot rot.
- A `--dask tcp://...` address is the reader's cluster: the test passes `--dask local` (a
  cluster of this machine, through the same Dask client), where `dask.distributed` is installed.
- NEEDS: a command of the real testbed runs where `dynosim testbed --check` finds every
  component, and is skipped with the missing ones named otherwise. (A local check, until the
  suite has one rule for real-stack tests in conftest.py.)
- `dynosim serve` runs until stopped: it is started on a free port, must answer there, and is
  stopped with Ctrl-C.
"""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.parse
import urllib.request

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from conftest import ROOT, end_process, run_process

PAGES = ["README.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
RUNNABLE = ("console", "bash")

#: The reader's own files a page names, as the test makes them: (how, why). `init` runs
#: `dynosim init NAME`; `fixture PATH` copies a file of the repository; `page PAGE` takes the
#: file PAGE shows (see shown_files); `folder` makes an empty folder.
FILES = {
    "my-app.toml": ("init", "the reader's scenario; README's tour writes it with `dynosim init my-app.toml`"),
    "my-scenario.toml": ("init", "the reader's scenario, as my-app.toml"),
    "my.toml": ("init", "the reader's scenario, as my-app.toml"),
    "fleet.toml": ("page docs/autoscaling.md", "the reader's autoscaled fleet: the how-to's"),
    "production.log.gz": ("fixture tests/fixtures/logs/heroku.log.gz", "the reader's router log"),
    "traces": ("folder", "the reader's folder of traces for `dynosim serve --data`"),
}


def shown_files(page):
    """The files a page shows whole: each ```toml block whose first line is a comment that
    starts with the file's name (`# fleet.toml: ...`). The page's folder gets them before its
    commands run, as the reader writes them before running what follows."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return {m.group(1): body for body in fenced(text, "toml")
            for m in [re.match(r"# ([\w.-]+\.toml)\b", body)] if m}


#: Documented commands that run for long, the options the test appends, and why. The key is
#: the command as the page writes it (continuation lines joined, comment and prompt left out).
SHORTENED = {
    # The simulator: a day, many rates, long animations.
    "dynosim run my-app.toml --seed 7 --replications 20 --duration 30min --json > out.json":
        ("--replications 3 --duration 2min", "20 replications of 30 min"),
    "dynosim run autoscale-day --wide": ("--duration 2h", "a day of five fleets (about 15 s)"),
    "dynosim sweep fanout-search --vary request.phases.1.count=1,2,5,10,20,50,100 --vary "
    "request.phases.1.hedge=false,p95 --metric response.p99 --out fanout-search":
        ("--duration 1min --replications 2", "14 points of 5 × 20 min (about 12 s)"),
    "dynosim run autoscale-day --timeseries day.csv --interval 10min": ("--duration 2h", "a day of five fleets"),
    "dynosim ramp hello-world-ramp --rates 500..16000/500 --out hello":
        ("--duration 1s --set run.warmup=0.5s --replications 2", "32 rates × 5 fleets of 3 × 22 s"),
    "dynosim animate rapgenius --out queues.gif": ("--seconds 10", "a minute of frames"),
    "dynosim animate --out queues.gif": ("--seconds 10", "a minute of frames"),
    "dynosim animate my-app.toml --out q.gif --policy random,power_of_d,intelligent --seconds 120":
        ("--seconds 10", "two minutes of frames, three policies"),
    # fleet.toml (docs/autoscaling.md's how-to) is a day of an autoscaled fleet.
    "dynosim tune fleet.toml --vary autoscale.upscale_above=100ms..800ms:4 --vary "
    'autoscale.downscale_delay=5min,10min,20min --target "response.p95 <= 500ms"':
        ("--duration 2h", "12 settings of a day each"),
    "dynosim tune fleet.toml --vary autoscale.upscale_above=50ms,100ms,200ms --vary "
    'autoscale.downscale_delay=5min,10min --target "response.p95 <= 500ms"': ("--duration 2h", "6 settings of a day"),
    "dynosim sweep fleet.toml --vary autoscale.upscale_above=50ms..400ms:8 --vary "
    "autoscale.downscale_delay=1min..20min:6 --dask tcp://scheduler.internal:8786":
        ("--duration 10min", "48 settings of a day each"),
    'dynosim tune fleet.toml --vary autoscale.upscale_above=50ms..400ms:8 --target "response.p95 <= 500ms" '
    "--dask local": ("--duration 10min", "8 settings of a day each"),
    "dynosim sweep my-app.toml --vary fleet.dynos=50..5000:100 --dask tcp://SCHEDULER:8786":
        ("--duration 30s --replications 2", "100 fleets of 5 × 5 min"),
    # The real testbed: real time (each figure's page gives the full run's wall time).
    "dynosim testbed my.toml --duration 60s --policy random,intelligent":
        ("--duration 3s --set run.warmup=0s", "a minute and a warm-up of 30 s, real time"),
    "dynosim testbed my.toml --json --out results/":
        ("--duration 3s --set run.warmup=0s", "5 min and a warm-up of 30 s, real time"),
    "dynosim testbed gunicorn-db --out results/": ("--set arrivals.requests=9", "300 requests at 2/s, real time"),
    "dynosim testbed my-scenario.toml --calibrate":
        ("--duration 3s --set run.warmup=0s", "5 min and a warm-up of 30 s, real time"),
    "dynosim testbed replay tests/fixtures/logs/shop.log.gz --speed 2.5 --alloc 1MiB --keep 0.02 --rounds 3 "
    '--config "default: workers=2 threads=5" --config "arena1: workers=2 threads=5 env=MALLOC_ARENA_MAX=1" '
    '--config "arena2: workers=2 threads=5 env=MALLOC_ARENA_MAX=2" -o results/':
        ("--window ..5s --rounds 1", "18 min, real time"),
    "dynosim testbed replay tests/fixtures/logs/shop.log.gz --window ..150s --speed 2.5 --alloc 1MiB --keep 0.02 "
    '--rounds 2 --config "default16: workers=2 threads=16" --config "arena1: workers=2 threads=16 '
    'env=MALLOC_ARENA_MAX=1" --config "arena2: workers=2 threads=16 env=MALLOC_ARENA_MAX=2" -o results/':
        ("--window ..5s --rounds 1", "6 min, real time"),
    "dynosim testbed tests/fixtures/testbed/fleet-step.toml --out results/":
        ("--duration 15s --set fleet.boot_time=3s", "10 min, real time; boots of 20 s"),
    "dynosim testbed tests/fixtures/testbed/fleet-step.toml --json --out results/":
        ("--duration 15s --set fleet.boot_time=3s", "10 min, real time; boots of 20 s"),
    "dynosim testbed tests/fixtures/testbed/fleet-storm.toml":
        ("--duration 45s", "90 s, real time; the slowdown from 20 s to 40 s"),
    "dynosim testbed bench/puma-gvl.toml --set app.threads=3 --set arrivals.clients=6":
        ("--duration 3s --set run.warmup=1s", "35 s, real time"),
    "dynosim testbed bench/puma-gvl.toml --set app.threads=3 --set arrivals.clients=6 --set "
    "'request.phases=[{cpu={distribution=\"exponential\",mean=\"10ms\"}},{io={distribution=\"exponential\","
    "mean=\"10ms\"}}]'": ("--duration 3s --set run.warmup=1s", "35 s, real time"),
    "dynosim testbed bench/puma-gvl.toml --set 'arrivals={process=\"poisson\",rate=\"70/s\"}' --set app.threads=3 "
    "--set 'request.phases=[{cpu={distribution=\"exponential\",mean=\"10ms\"}},{io={distribution=\"exponential\","
    "mean=\"10ms\"}}]'": ("--duration 3s --set run.warmup=1s", "35 s, real time"),
}

#: What a command needs beyond the package, by its first words.
NEEDS = {"dynosim testbed": "the real testbed (HAProxy, PostgreSQL, gunicorn...: make testbed-deps)"}


def fenced(text, *languages):
    """The bodies of a page's fenced code blocks in these languages, in order."""
    return [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)
            if lang in languages]


def page_commands(page):
    """`dynosim ...` command lines of a page's console and bash blocks, continuation lines
    joined, prompts and trailing comments removed."""
    commands = []
    for body in fenced((ROOT / page).read_text(encoding="utf-8"), *RUNNABLE):
        for line in re.sub(r"[ \t]*\\\n\s*", " ", body).splitlines():
            line = line.strip().removeprefix("$ ").strip().removeprefix(".venv/bin/")
            if line.startswith("dynosim "):
                commands.append(_without_comment(line))
    return commands


def _without_comment(line):
    """The command without a trailing `# comment` (a `#` outside quotes, after a space)."""
    quote, previous = "", " "
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and previous.isspace():
            return line[:i].rstrip()
        previous = ch
    return line


COMMANDS = [(page, i, command) for page in PAGES for i, command in enumerate(page_commands(page))]


def test_the_readme_has_a_tour_that_starts_from_init():
    commands = page_commands("README.md")
    assert len(commands) >= 10, commands
    uses = [i for i, c in enumerate(commands) if "my-app.toml" in c]
    assert uses and commands[uses[0]].startswith("dynosim init my-app.toml"), commands


def test_every_page_with_commands_is_found_and_the_tables_match_them():
    documented = {command for _page, _i, command in COMMANDS}
    assert sum(page != "README.md" for page, _i, _c in COMMANDS) >= 30, COMMANDS
    stale = [command for command in SHORTENED if command not in documented]
    assert not stale, f"SHORTENED entries that no page shows (update the table): {stale}"
    # A synopsis in a runnable block would be run and fail: pages keep them in text blocks.
    synopses = [c for c in documented if re.search(r"\[--|FILE\.\.\.|\.\.\. ", c)]
    assert not synopses, synopses


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """One scratch folder per page, made on first use (see the module's docstring)."""
    made = {}

    def folder(page):
        if page not in made:
            made[page] = _page_folder(page, tmp_path_factory.mktemp(page.replace("/", "-").replace(".md", "")))
        return made[page]

    return folder


def _page_folder(page, path):
    (path / "tests").mkdir()
    (path / "tests" / "fixtures").symlink_to(ROOT / "tests" / "fixtures")
    (path / "bench").symlink_to(ROOT / "bench")
    text = (ROOT / page).read_text(encoding="utf-8")
    for name, body in shown_files(page).items():
        (path / name).write_text(body, encoding="utf-8")
    for name, (how, _why) in FILES.items():
        if (path / name).exists():
            continue
        if not re.search(rf"(?:^|[\s\"'(=`])(?:\./)?{re.escape(name)}(?![\w.-]*\w)", text, re.M) \
                or f"dynosim init {name}" in text:
            continue
        target = path / name
        if how == "init":
            result = run_process([sys.executable, "-m", "dynosim", "init", name], cwd=path, text=True, timeout=60)
            assert result.returncode == 0, result.stderr
        elif how.startswith("fixture "):
            target.write_bytes((ROOT / how.split(" ", 1)[1]).read_bytes())
        elif how.startswith("page "):
            target.write_text(shown_files(how.split(" ", 1)[1])[name], encoding="utf-8")
        elif how == "folder":
            target.mkdir()
    return path


def _environment():
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    env.pop("COLUMNS", None)
    return env


def _as_run(command):
    """The command the test runs for a documented one (see the tables), and why it differs."""
    notes = []
    extra = SHORTENED.get(command)
    if extra:
        head, redirect, tail = command.partition(" > ")
        command = f"{head} {extra[0]}{redirect}{tail}"
        notes.append(extra[1])
    if re.search(r"--dask tcp://\S+", command):
        command = re.sub(r"--dask tcp://\S+", "--dask local", command)
        notes.append("--dask local for the reader's cluster")
    return command, notes


_TESTBED_CHECK = {}


def _missing(command):
    """Why a command cannot run here, or None."""
    if "--dask" in command:
        try:
            import dask.distributed  # noqa: F401
        except ImportError:
            return "dask.distributed is not installed (pip install 'dynosim[dask]')"
    for prefix, what in NEEDS.items():
        if command.startswith(prefix):
            if "check" not in _TESTBED_CHECK:
                result = run_process([sys.executable, "-m", "dynosim", "testbed", "--check"], text=True, timeout=120,
                                     env=_environment())
                missing = [line.split()[1].rstrip(":") for line in result.stdout.splitlines()
                           if line.startswith("missing")]
                _TESTBED_CHECK["check"] = missing if result.returncode != 0 else []
            if _TESTBED_CHECK["check"]:
                return f"needs {what}; missing here: {', '.join(_TESTBED_CHECK['check'])}"
    return None


@pytest.mark.parametrize("page, index, command", COMMANDS, ids=[f"{p}:{i}" for p, i, _c in COMMANDS])
def test_every_documented_command_runs(folders, page, index, command):
    reason = _missing(command)
    if reason:
        pytest.skip(reason)
    cwd, env = folders(page), _environment()
    if command.startswith("dynosim serve"):
        failure = serve_answers(command, cwd, env)
        assert failure is None, failure
        return
    ran, notes = _as_run(command)
    # The whole group is killed should one hang: bash's dynosim too, not only bash.
    result = run_process(["bash", "-c", ran], cwd=cwd, env=env, text=True, timeout=300)
    redirected = re.search(r">\s*(\S+)", ran)
    output = (cwd / redirected.group(1)).read_text() if redirected else result.stdout
    assert result.returncode == 0 and output.strip(), (
        f"{page}: {command}\n  ran as: {ran} ({'; '.join(notes) or 'verbatim'})\n"
        f"  exit {result.returncode}: {result.stderr.strip()[-800:]}")


def serve_answers(command, cwd, env):
    """`dynosim serve` runs until stopped: started (on a free port, which the page's 8050 or
    9000 may not be), it must print its address and answer there; then Ctrl-C stops it."""
    words = shlex.split(command)
    proc = subprocess.Popen([sys.executable, "-m", "dynosim", *words[1:], "--port", "0"], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = proc.stdout.readline()
        if "http://" not in line:
            return f"{command}\n  printed no address: {proc.stderr.read()[-500:]}"
        where = line.split("http://", 1)[1].split("/", 1)[0]
        with urllib.request.urlopen(f"http://{where}/api/scenarios", timeout=30) as r:
            json.loads(r.read())
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=20)
        return None
    finally:
        end_process(proc)


def test_the_readme_python_snippet_runs():
    (snippet,) = fenced((ROOT / "README.md").read_text(encoding="utf-8"), "python")
    exec(compile(snippet, "README.md", "exec"), {})


def test_the_readme_scenario_is_valid():
    from dynosim import Scenario

    (toml,) = fenced((ROOT / "README.md").read_text(encoding="utf-8"), "toml")
    Scenario.load(tomllib.loads(toml)).validate()


def test_the_readme_tables_name_every_policy_and_distribution():
    from dynosim import _dynosim

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    registry = _dynosim.registry()
    for key, names in (("router.policy", registry["policies"]), ("service.distribution", registry["distributions"])):
        table = readme.split(f"| `{key}` |", 1)[1].split("\n\n", 1)[0]
        rows = re.findall(r"^\| `(\w+)` \|", table, re.M)
        assert sorted(rows) == sorted(names), (key, rows)


# --- output.md ---------------------------------------------------------------------------------

#: Runs that between them report every kind of metric: the plain model; the dyno model with a
#: database and a closed loop; memory and arenas; a fleet that changes size by an autoscaler,
#: and by daily restarts and deploys; Join-Idle-Queue's lists; request classes. Each short.
METRIC_RUNS = [
    ("rapgenius", {"router.policy": "random", "run.duration": "1min", "run.replications": 2}),
    ("gunicorn-db", {"arrivals.requests": 60, "run.replications": 2}),
    ("malloc-arenas", {"run.duration": "10s", "run.replications": 2}),
    ("rapgenius", {"router.policy": "random", "autoscale.rule": "judoscale", "autoscale.min": 60,
                   "autoscale.max": 150, "run.duration": "5min", "run.replications": 2}),
    ("rapgenius", {"router.policy": "random", "fleet.cycling": "10min", "fleet.deploy": [{"at": "2min"}],
                   "run.duration": "5min", "run.replications": 2}),
    ("rapgenius", {"router.policy": "jiq", "router.routers": 2, "run.duration": "1min", "run.replications": 2}),
    ("gunicorn-db", {"arrivals.requests": 60, "run.replications": 2, "request.phases": None,
                     "request.class": [
                         {"name": "fast", "weight": 3, "phases": [{"cpu": "50ms"}]},
                         {"name": "slow", "weight": 1, "phases": [{"cpu": "100ms"}, {"use": "db", "time": "1s"}]}]}),
]


def _documented_names(text):
    """Every `name` in backticks of a page, with `NAME` standing for any resource or class."""
    return set(re.findall(r"`([\w.*]+)`", text))


def _is_documented(name, documented):
    generic = re.sub(r"^(resources|classes)\.[^.]+\.", r"\1.NAME.", name)
    if generic in documented:
        return True
    parts = generic.split(".")
    return any(".".join(parts[:i]) + ".*" in documented for i in range(1, len(parts)))


def _report_leaves(report):
    from dynosim.results import _leaves

    names = set()
    for tree in [report["summary"], *report["per_replication"]]:
        names.update(leaf for leaf in _leaves(tree) if not leaf.endswith("per_dyno"))
    return names


@pytest.fixture(scope="module")
def metric_reports():
    import dynosim

    reports = []
    for name, overrides in METRIC_RUNS:
        scenario = dynosim.Scenario.load(name)
        doc = scenario.doc
        if overrides.get("request.phases", 0) is None:  # classes replace the phases
            doc = {**doc, "request": {k: v for k, v in doc["request"].items() if k != "phases"}}
            scenario = dynosim.Scenario(doc, source=name)
        scenario = scenario.with_overrides({k: v for k, v in overrides.items() if v is not None})
        reports += [r.to_dict() for r in dynosim.run(scenario)]
    return reports


def test_every_metric_a_run_writes_is_in_output_md(metric_reports):
    from dynosim.results import METRICS, OPTIONAL_METRICS, is_metric

    documented = _documented_names((ROOT / "docs" / "output.md").read_text(encoding="utf-8"))
    written = set().union(*map(_report_leaves, metric_reports))
    # The runs reach every kind: a metric no run writes would go unchecked below.
    assert {"cost.dollars", "fleet.cycles", "fleet.deploys", "autoscale.actions", "routing.idle_hits",
            "closed_loop.requests_per_s", "dyno.memory.peak"} <= written
    assert any(n.startswith("resources.db.") for n in written) and any(n.startswith("classes.") for n in written)
    undocumented = sorted(n for n in written | set(METRICS) | set(OPTIONAL_METRICS) if not _is_documented(n, documented))
    assert not undocumented, f"metrics a run writes that docs/output.md does not name: {undocumented}"
    # And the package knows each as a metric (targets, sweeps, tune take them).
    assert all(is_metric(n) for n in written), sorted(n for n in written if not is_metric(n))


def test_every_field_of_a_report_is_in_output_md(metric_reports):
    text = (ROOT / "docs" / "output.md").read_text(encoding="utf-8")
    table = text.split("## A report", 1)[1].split("\n## ", 1)[0]
    documented = _documented_names(table)
    fields = set().union(*(set(r) for r in metric_reports))
    assert not sorted(fields - documented), sorted(fields - documented)


# --- links -----------------------------------------------------------------------------------


def _anchors(path):
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation but `-` and `_`
    dropped, spaces to `-`, repeats numbered."""
    seen, out = {}, set()
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", "")).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page):
    text = re.sub(r"^```.*?^```", "", (ROOT / page).read_text(encoding="utf-8"), flags=re.M | re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_relative_link_leads_somewhere():
    broken = []
    for page in PAGES:
        base = (ROOT / page).parent
        for link in _links(page):
            if re.match(r"[a-z]+:", link):
                continue
            target, _, anchor = link.partition("#")
            path = (base / urllib.parse.unquote(target)).resolve() if target else ROOT / page
            if not path.exists() or ROOT not in path.parents:
                broken.append(f"{page}: {link} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{page}: {link} (no such heading in {path.name})")
    assert not broken, "\n".join(broken)


def test_no_page_sends_readers_outside_the_repository():
    outside = [f"{page}: {m}" for page in PAGES
               for m in re.findall(r"\.\./shared/\S+", (ROOT / page).read_text(encoding="utf-8"))]
    assert not outside, outside


def test_the_pages_images_are_in_one_folder_and_each_is_shown():
    docs = ROOT / "docs"
    assert sorted(p.name for p in docs.iterdir() if p.is_dir()) == ["images"]
    shown = {(ROOT / page).parent.joinpath(urllib.parse.unquote(link)).resolve()
             for page in PAGES for link in _links(page) if not re.match(r"[a-z]+:", link)}
    unshown = sorted(p.name for p in (docs / "images").iterdir() if p.resolve() not in shown)
    assert not unshown, f"images no page shows: {unshown}"
