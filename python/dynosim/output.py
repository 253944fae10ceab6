"""Every output dynosim writes: files atomically, stdout as one complete document.

Files (``write_files``): each target is written to a temporary file beside it, synced to
disk, and renamed over the target only once every target of the set is written; the folder
is synced after the renames. A reader sees each target either as it was or complete. On an
error, Ctrl-C or SIGTERM no target is created or changed, and the temporary files and any
folder made for them are removed. Write errors become one line naming the target and the
operating system's reason.

Stdout (``stdout_document``, ``print_json``): what a command prints is collected and written
in one go once the command has succeeded, so a failed or interrupted command prints nothing
rather than half a table. JSON is strict (RFC 8259): a non-finite number becomes ``null``.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import secrets
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, TextIO, Tuple

from .errors import DynosimError

#: Writes one output into the temporary path it is given.
Writer = Callable[[Path], object]


# --- files -----------------------------------------------------------------------------------


def write_files(writers: Mapping[Path, Writer], *, option: str = "--out", overwrite: bool = True) -> None:
    """Writes every target with its writer, all or nothing (see the module's docstring).

    A missing folder is created (and removed again on failure). ``option`` names where the
    paths came from in error messages: ``--out: cannot write x.csv: Permission denied``.
    Without ``overwrite``, a target that exists (even one that appeared while writing) is
    kept and the write fails with FileExistsError."""
    targets = list(writers)
    temps: Dict[Path, Path] = {}
    renamed: List[Tuple[Path, bool, Optional[Path]]] = []  # (target, existed, its old content)
    created: List[Path] = []
    current: Path = targets[0] if targets else Path(".")
    try:
        for target in targets:
            current = target
            if target.is_dir():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
        for folder in dict.fromkeys(t.parent for t in targets):
            current = folder
            created += _make_folder(folder)
        for target, write in writers.items():
            current = target
            tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
            # A new file's usual mode (0666 less the umask), unlike mkstemp's private 0600.
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            temps[target] = tmp
            write(tmp)
            _sync(tmp)
        for target in targets:
            current = target
            existed = target.exists()
            backup = _backup(target) if existed else None
            try:
                if overwrite:
                    os.replace(temps[target], target)
                else:  # a link fails, rather than replaces, when the target exists
                    os.link(temps[target], target)
                    os.unlink(temps[target])
            except BaseException:
                _remove(backup)
                raise
            del temps[target]
            renamed.append((target, existed, backup))
        for folder in dict.fromkeys(t.parent for t in targets):
            _sync_folder(folder)
    except BaseException as e:
        for tmp in temps.values():
            _remove(tmp)
        _restore(renamed)
        for folder in created:  # innermost first
            try:
                folder.rmdir()
            except OSError:
                break
        if isinstance(e, OSError) and not isinstance(e, FileExistsError):
            raise DynosimError(f"cannot write {current}: {e.strerror or e}", file=option) from None
        raise
    finally:
        for _, _, backup in renamed:
            _remove(backup)


def _make_folder(folder: Path) -> List[Path]:
    """Creates ``folder`` and its missing parents; returns those it created, innermost first."""
    missing = []
    d = folder.resolve()
    while not d.exists():
        missing.append(d)
        d = d.parent
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    """Makes the renames durable. Not every system can sync a folder (Windows cannot open
    one; some file systems refuse): the renames are done either way."""
    try:
        _sync(folder)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EACCES, errno.EISDIR):
            raise


def _backup(target: Path) -> Optional[Path]:
    """A hard link to the target's current content, so that it can be put back if a later
    rename of the set fails; None where the file system has no hard links."""
    backup = target.with_name(f".{target.name}.{secrets.token_hex(4)}.old")
    try:
        os.link(target, backup)
    except OSError:
        return None
    return backup


def _restore(renamed: List[Tuple[Path, bool, Optional[Path]]]) -> None:
    """Undoes the renames done so far: old content back, new targets removed."""
    for target, existed, backup in renamed:
        with contextlib.suppress(OSError):
            if not existed:
                os.unlink(target)
            elif backup is not None:
                os.replace(backup, target)


def _remove(path: Optional[Path]) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)


# --- stdout ----------------------------------------------------------------------------------


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) replaced by None, in nested dicts,
    lists and tuples: JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def json_text(doc: Any) -> str:
    """A JSON document, strict (RFC 8259: ``null`` for non-finite numbers), with a newline."""
    return json.dumps(finite(doc), indent=2, allow_nan=False, default=str) + "\n"


def print_json(doc: Any) -> None:
    """Prints ``doc`` as one strict JSON document, written in one go."""
    sys.stdout.write(json_text(doc))
    sys.stdout.flush()


def csv_text(columns: List[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """Rows as CSV text with a header: floats to 9 significant digits, None as an empty cell."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if v is None else f"{v:.9g}" if isinstance(v, float) else v) for k, v in r.items()})
    return out.getvalue()


class _Document(io.StringIO):
    """Collects stdout; answers like the real stdout so that tables are laid out for it."""

    def __init__(self, stdout: TextIO) -> None:
        super().__init__()
        self._stdout = stdout

    def isatty(self) -> bool:
        return self._stdout.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stdout, "encoding", None) or "utf-8"


@contextlib.contextmanager
def stdout_document() -> Iterator[None]:
    """Everything printed to stdout inside the block is written in one go when the block
    succeeds, and dropped when it raises."""
    stdout = sys.stdout
    document = _Document(stdout)
    with contextlib.redirect_stdout(document):
        yield
    stdout.write(document.getvalue())
    stdout.flush()


def live_stdout() -> TextIO:
    """The real stdout, beneath :func:`stdout_document`'s: for a line that must be seen now
    (a server's address), not when the command ends."""
    out = sys.stdout
    return out._stdout if isinstance(out, _Document) else out


def silence_stdout() -> None:
    """After a broken pipe (``dynosim run --json | head -1``): points stdout at the null
    device, so that the interpreter's last flush at exit does not fail a second time."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
