"""Every command the README shows runs, verbatim, in the order it shows them (a new user
follows the tour from `dynosim init`); its Python snippet and its scenario run too."""

import os
import re
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from conftest import ROOT, run_process

README = (ROOT / "README.md").read_text(encoding="utf-8")


def fenced(*languages):
    """The bodies of the README's fenced code blocks in these languages, in order."""
    return [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", README, re.M | re.S)
            if lang in languages]


def readme_commands():
    """`dynosim ...` command lines of the console and bash blocks, continuation lines joined,
    prompts removed (`make demo` and `make test` are what CI runs)."""
    commands = []
    for body in fenced("console", "bash"):
        for line in body.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ").strip()
            if line.startswith("dynosim "):
                commands.append(line)
    return commands


def test_the_readme_has_a_tour_that_starts_from_init():
    commands = readme_commands()
    assert len(commands) >= 10, commands
    uses = [i for i, c in enumerate(commands) if "my-app.toml" in c]
    assert uses and commands[uses[0]].startswith("dynosim init my-app.toml"), commands


def test_every_readme_command_runs(tmp_path):
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    env.pop("COLUMNS", None)
    failures = []
    for command in readme_commands():
        if command.startswith("dynosim serve"):
            failure = serve_answers(command, tmp_path, env)
            if failure:
                failures.append(failure)
            continue
        # The whole group is killed should one hang: bash's dynosim too, not only bash.
        result = run_process(["bash", "-c", command], cwd=tmp_path, env=env, text=True, timeout=300)
        redirected = re.search(r">\s*(\S+)", command.split("#")[0])
        output = (tmp_path / redirected.group(1)).read_text() if redirected else result.stdout
        if result.returncode != 0 or not output.strip():
            failures.append(f"{command}\n  exit {result.returncode}: {result.stderr.strip()[-500:]}")
    assert not failures, "README commands that fail:\n" + "\n".join(failures)


def serve_answers(command, cwd, env):
    """`dynosim serve` runs until stopped: started (on a free port, which the README's default
    8050 may not be), it must print its address and answer there; then Ctrl-C stops it."""
    import json
    import signal
    import subprocess
    import urllib.request

    from conftest import end_process

    words = command.split("#")[0].split()
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
    (snippet,) = fenced("python")
    exec(compile(snippet, "README.md", "exec"), {})


def test_the_readme_scenario_is_valid():
    from dynosim import Scenario

    (toml,) = fenced("toml")
    Scenario.load(tomllib.loads(toml)).validate()
