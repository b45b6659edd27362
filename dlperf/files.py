"""Files written whole or not at all, claimed by one process at a time, on disks that can fill.

Every file dlperf keeps (results, sweep state, reports, caches) is written through
`atomic_write` or `replaced`: a temporary file beside the target, then a rename, so a reader at
the same moment, a crash or a full disk leaves the old file or the new one, never half of one
and never a `.tmp`. A write that fails raises `StorageError`, which names the path and the
system's reason ("No space left on device", "Read-only file system") for the user to act on.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from dlperf import DlperfError

PROBE_BYTES = 1 << 20
"""`check_writable` writes this much: a disk that cannot take 1 MiB cannot take a run's logs."""


def dlperf_home() -> Path:
    """Where dlperf keeps its envs, sources and caches: $DLPERF_HOME, else ~/.cache/dlperf."""
    env = os.environ.get("DLPERF_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dlperf"


class StorageError(DlperfError):
    """A file dlperf must write could not be written: the path and the reason are in the text."""


def describe(exc: OSError) -> str:
    """The system's reason for `exc`, with a hint for the common ones."""
    reason = exc.strerror or str(exc)
    hint = {
        errno.ENOSPC: "free some space or choose another folder",
        errno.EDQUOT: "free some space or choose another folder",
        errno.EROFS: "choose a writable folder",
        errno.EACCES: "check the folder's permissions or choose another",
        errno.EPERM: "check the folder's permissions or choose another",
    }.get(exc.errno or 0)
    return f"{reason} ({hint})" if hint else reason


STORAGE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO, errno.EACCES}
)
"""What a write fails with when the disk, not the program, is the problem."""


def storage_error(path: Path | str, exc: OSError, exit_code: int = 1) -> StorageError:
    return StorageError(f"cannot write {path}: {describe(exc)}", exit_code)


def remove_empty_files(folder: Path) -> None:
    """After a failed write: drop the empty files it left in `folder`, and `folder` if empty."""
    with contextlib.suppress(OSError):
        for path in Path(folder).rglob("*"):
            with contextlib.suppress(OSError):
                if path.is_file() and path.stat().st_size == 0:
                    path.unlink()
        for path in sorted(Path(folder).rglob("*"), reverse=True):
            with contextlib.suppress(OSError):
                path.rmdir()  # only empty folders go
        Path(folder).rmdir()


@functools.cache
def shared_mode() -> int:
    """The mode a plain open() gives a new file under this process's umask (0644 under 022):
    results, reports and sites are shared by a team, so they follow the umask, whereas the
    temporary files `replaced` starts from are private (0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def replaced(path: Path, *, private: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block succeeds it becomes `path`, with
    the umask's mode (`shared_mode`), or 0600 when `private`.

    On any failure the temporary file is removed (and an OSError becomes StorageError); `path`
    keeps its old content, if it had one.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}"
        )
        os.close(fd)
    except OSError as exc:
        raise storage_error(path, exc) from None
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o600 if private else shared_mode())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise storage_error(path, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, data: str | bytes, *, private: bool = False) -> Path:
    """Write `data` (text is UTF-8) to `path` whole or not at all; returns `path`. The file
    follows the umask unless `private` (0600)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with replaced(path, private=private) as tmp, open(tmp, "wb") as handle:
        handle.write(raw)
        handle.flush()
        os.fsync(handle.fileno())  # a full disk may only say so here (NFS, delayed allocation)
    return Path(path)


def atomic_write_json(path: Path, data: Any, indent: int | None = 2) -> Path:
    return atomic_write(path, json.dumps(data, indent=indent, sort_keys=True) + "\n")


def check_writable(folder: Path, what: str) -> None:
    """Refuse, before anything runs, a folder that cannot take a run's files.

    Creates `folder` if needed and writes (then removes) a PROBE_BYTES file in it, so a
    read-only, full or forbidden folder is named now rather than after the measurements.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise StorageError(f"{what} {folder} is a file, not a folder; give a folder")
    probe: Path | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=folder, prefix=".dlperf-probe.", suffix=".tmp")
        probe = Path(name)
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"\0" * PROBE_BYTES)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise StorageError(f"{what} {folder} cannot be written: {describe(exc)}") from None
    finally:
        if probe is not None:
            with contextlib.suppress(OSError):
                probe.unlink()


class NotALockFile(StorageError):
    """Something other than a plain file of its own sits where a lock file goes (a symbolic
    link, a folder, a FIFO, a device, a file with other names): dlperf neither follows nor
    writes it, so a link planted there cannot make it empty or overwrite the file it names."""


# Never follow a link, never take a terminal as the controlling one, never wait on a FIFO with
# no reader (O_NONBLOCK: such an open fails at once, where a plain open() blocks forever).
_LOCK_OPEN = (
    os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK
    | os.O_CLOEXEC
)  # fmt: skip


def _not_a_lock_file(path: Path, mode: int, links: int = 1) -> NotALockFile:
    kind = (
        "a symbolic link" if stat.S_ISLNK(mode)
        else "a folder" if stat.S_ISDIR(mode)
        else "a FIFO" if stat.S_ISFIFO(mode)
        else "a socket" if stat.S_ISSOCK(mode)
        else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else f"a file with {links} names (hard links)"
    )  # fmt: skip
    return NotALockFile(
        f"{path} is {kind}, not a lock file dlperf made: left as it is; remove it if nothing "
        "of yours needs it"
    )


def try_lock(path: Path) -> IO[bytes] | None:
    """An exclusive lock on `path` (created if needed), or None when another process holds it.

    The lock lasts while the returned file stays open, and ends with the process however it
    ends (kill -9 included), so a lock file never outlives its owner's claim. A lock file is
    written ("held by pid ..."), so whatever else sits at `path` is refused with `NotALockFile`
    before anything is written: looked at without following it, then opened without following
    it, and checked again once open (it may have been swapped in between).
    """
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise storage_error(path, exc) from None
    else:  # refused before it is opened: opening a device or a FIFO may act on it
        if not stat.S_ISREG(found.st_mode) or found.st_nlink > 1:
            raise _not_a_lock_file(path, found.st_mode, found.st_nlink)
    try:
        fd = os.open(path, _LOCK_OPEN, 0o666)  # the umask applies, as with open()
    except OSError as exc:
        # Swapped in after the look: a link (ELOOP), a folder, a FIFO with no reader (ENXIO).
        swapped = None
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            with contextlib.suppress(OSError):
                swapped = os.lstat(path).st_mode
        if swapped is not None and not stat.S_ISREG(swapped):
            raise _not_a_lock_file(path, swapped) from None
        raise storage_error(path, exc) from None
    handle = os.fdopen(fd, "ab")
    opened = os.fstat(fd)
    # More than one name: a hard link to someone's file. No name left (0) is fine: the sweep
    # that held it removed it as it ended, and the state file, not the lock, decides a claim.
    if not stat.S_ISREG(opened.st_mode) or opened.st_nlink > 1:
        handle.close()
        raise _not_a_lock_file(path, opened.st_mode, opened.st_nlink)
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    try:  # who holds it, for a user wondering which process is still at work
        handle.truncate(0)
        handle.write(f"held by pid {os.getpid()} on {socket.gethostname()}\n".encode())
        handle.flush()
    except OSError as exc:
        handle.close()
        raise storage_error(path, exc) from None
    return handle
