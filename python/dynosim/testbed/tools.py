"""Where the testbed's real components are on this machine, and how to install them.

``dynosim testbed --check`` prints :func:`check`; ``make testbed-deps`` (which CI runs)
installs what is missing: HAProxy, nginx (``router.kind = "nginx"``), PostgreSQL and the Ruby
servers (Ruby, Puma, Unicorn, the pg gem, Rack, Rack::Timeout) from Debian's packages, gunicorn, gevent and
psycopg from the Python package index into the environment dynosim runs in.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, List, Optional

from ..errors import DynosimError

INSTALL_DEBIAN = "apt-get install haproxy postgresql"
INSTALL_NGINX = "apt-get install nginx"
INSTALL_RUBY = "apt-get install ruby puma unicorn ruby-pg ruby-rack ruby-rack-timeout"
INSTALL_PYTHON = f"{sys.executable} -m pip install 'dynosim[testbed]'  (gunicorn, gevent, psycopg)"

#: Where Debian keeps daemons, off a user's PATH (HAProxy, nginx), and PostgreSQL's binaries,
#: one directory per major version; looked in after PATH.
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin")
POSTGRES_BINDIRS = "/usr/lib/postgresql/*/bin"


@dataclass(frozen=True)
class Tool:
    name: str
    path: Optional[str]
    version: Optional[str]
    install: str

    @property
    def present(self) -> bool:
        return self.path is not None


def _version(argv: List[str], pattern: str) -> Optional[str]:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(pattern, out.stdout + out.stderr)
    return m.group(1) if m else None


def _sbin(name: str) -> Optional[str]:
    return shutil.which(name) or next(
        (p for p in (os.path.join(d, name) for d in SBIN_DIRS) if os.access(p, os.X_OK)), None)


def haproxy() -> Tool:
    path = _sbin("haproxy")
    version = _version([path, "-v"], r"version (\S+)") if path else None
    return Tool("haproxy", path, version, INSTALL_DEBIAN)


def nginx() -> Tool:
    """nginx, for ``router.kind = "nginx"`` (Debian keeps it in /usr/sbin, off a user's PATH)."""
    path = _sbin("nginx")
    version = _version([path, "-v"], r"nginx/(\S+)") if path else None
    return Tool("nginx", path, version, INSTALL_NGINX)


def postgres_bindir() -> Optional[str]:
    """The directory holding postgres and initdb: Debian keeps them in
    /usr/lib/postgresql/VERSION/bin (newest first), elsewhere they are on PATH."""
    candidates = sorted(glob.glob(POSTGRES_BINDIRS),
                        key=lambda p: [int(x) for x in re.findall(r"\d+", p)], reverse=True)
    for d in candidates:
        if all(os.access(os.path.join(d, exe), os.X_OK) for exe in ("postgres", "initdb")):
            return d
    found = shutil.which("postgres")
    if found and shutil.which("initdb"):
        return os.path.dirname(os.path.realpath(found))
    return None


def postgres() -> Tool:
    bindir = postgres_bindir()
    path = os.path.join(bindir, "postgres") if bindir else None
    version = _version([path, "--version"], r"(\d+(?:\.\d+)*)") if path else None
    return Tool("postgres", path, version, INSTALL_DEBIAN)


def python_module(name: str, module: str) -> Tool:
    spec = importlib.util.find_spec(module)
    version = None
    if spec is not None:
        try:
            from importlib.metadata import version as dist_version

            version = dist_version(name)
        except Exception:
            version = None
    return Tool(name, spec.origin if spec and spec.origin else None, version, INSTALL_PYTHON)


def ruby() -> Tool:
    path = shutil.which("ruby")
    version = _version([path, "-v"], r"ruby (\S+)") if path else None
    return Tool("ruby", path, version, INSTALL_RUBY)


def ruby_server(name: str) -> Tool:
    """puma or unicorn: their executable scripts, which run under ``ruby``."""
    path = shutil.which(name)
    version = _version([path, "--version" if name == "puma" else "-v"], r"(\d+\.\d+\.\d+)") if path else None
    return Tool(name, path, version, INSTALL_RUBY)


def ruby_library(name: str, feature: str, constant: str) -> Tool:
    """A library Ruby can require (``ruby-pg``: pg, ``ruby-rack``: rack): present when it loads."""
    exe = shutil.which("ruby")
    version = _version([exe, "-e", f'require "{feature}"; print "version " + {constant}'],
                       r"version (\S+)") if exe else None
    return Tool(name, f"ruby: require {feature!r}" if version else None, version, INSTALL_RUBY)


#: The Ruby components (``app.server = "puma"`` or ``"unicorn"``; Rack::Timeout for
#: app.wait_timeout and app.service_timeout).
RUBY_TOOLS = ("ruby", "puma", "unicorn", "ruby-pg", "ruby-rack", "ruby-rack-timeout")


def tools() -> List[Tool]:
    return [haproxy(), nginx(), postgres(), python_module("gunicorn", "gunicorn"), python_module("gevent", "gevent"),
            python_module("psycopg", "psycopg"), ruby(), ruby_server("puma"), ruby_server("unicorn"),
            ruby_library("ruby-pg", "pg", "PG::VERSION"), ruby_library("ruby-rack", "rack", "Rack.release"),
            ruby_library("ruby-rack-timeout", "rack-timeout", 'Gem.loaded_specs["rack-timeout"].version.to_s')]


def missing(needed: List[str]) -> List[Tool]:
    """The tools among `needed` that are not installed."""
    return [t for t in tools() if t.name in needed and not t.present]


def needed_tools(plans: List[Any]) -> List[str]:
    """What the plans run: gunicorn, or Ruby and Puma or Unicorn (app.server), and the drivers
    of their database."""
    servers = {p.dynos.server for p in plans}
    needed = sorted({p.router.kind for p in plans}) + (["gunicorn"] if "gunicorn" in servers else [])
    if servers - {"gunicorn"}:
        needed += ["ruby", "ruby-rack"] + sorted(servers - {"gunicorn"})
        if any(p.dynos.server != "gunicorn" and (p.dynos.wait_timeout, p.dynos.service_timeout) != (None, None)
               for p in plans):
            needed.append("ruby-rack-timeout")  # app.wait_timeout, app.service_timeout: Rack::Timeout's own
    if any(p.resources for p in plans):
        # The testbed itself talks to PostgreSQL through psycopg (to know it is up, to set up
        # its burn function), whichever server the dynos run.
        needed += ["postgres", "psycopg"]
        needed += ["ruby-pg"] if any(p.resources and p.dynos.server != "gunicorn" for p in plans) else []
    if any(p.dynos.worker_class == "gevent" for p in plans):
        needed.append("gevent")
    return needed


def check_tools(plans: List[Any]) -> None:
    """Refuses, in one line saying how to install them, plans whose components are missing."""
    absent = missing(needed_tools(plans))
    if absent:
        ruby = [p.dynos.server for p in plans if p.dynos.server != "gunicorn"]
        because = f'app.server = "{ruby[0]}" runs the real {ruby[0]}: ' if ruby else ""
        raise DynosimError(because + "the testbed needs " + ", ".join(t.name for t in absent) + " (not found); install: "
                           + "; ".join(dict.fromkeys(t.install for t in absent)) + " (or: dynosim testbed --check)")
