"""The package's exceptions.

Every error the engine reports is mapped here, once, to one of these classes. Each carries
where it happened (``file``, ``path``: the dotted key path in the scenario) and renders as a
single line, which the CLI prints as is.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "DynosimError",
    "ScenarioError",
    "UnstableError",
    "OverloadedError",
    "LogError",
    "NotSteadyWarning",
    "from_engine",
]


class DynosimError(Exception):
    """Base class of every error dynosim raises on purpose."""

    def __init__(self, message: str, *, file: Optional[str] = None, path: str = "") -> None:
        self.message = message
        self.file = file
        self.path = path
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.file, self.path) if part)
        return _printable(f"{where}: {self.message}" if where else self.message)


def _printable(text: str) -> str:
    """One line whatever the user typed: control and other unprintable characters (a newline,
    a form feed in a key) are shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class ScenarioError(DynosimError, ValueError):
    """The scenario (a file, a dict or an override) is invalid."""


class UnstableError(DynosimError, ValueError):
    """Offered load at or above capacity: queues would grow without bound."""


class OverloadedError(DynosimError, RuntimeError):
    """A run was stopped because its queues outgrew the memory guard."""


class LogError(DynosimError, ValueError):
    """A router log cannot be read or summarised: a file that cannot be opened, a truncated
    gzip, a bad ``--log-format``, or no request in it (the message says why, with line numbers)."""


class NotSteadyWarning(UserWarning):
    """Offered load so close to capacity that the run is short next to the time its queues
    take to settle: its figures may not be steady state."""


def from_engine(error: Exception, file: Optional[str] = None) -> BaseException:
    """Maps the compiled module's ``EngineError(kind, path, message)`` to a package error."""
    kind, path, message = error.args
    if kind == "config":
        return ScenarioError(message, file=file, path=path)
    if kind == "unstable":
        return UnstableError(message, file=file)
    if kind == "overloaded":
        return OverloadedError(message, file=file)
    if kind == "log":
        return LogError(message, file=file)
    if kind == "interrupted":
        return KeyboardInterrupt()
    return DynosimError(message, file=file, path=path)
