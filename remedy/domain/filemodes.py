"""Files gpu-remedy creates are its own: 0600 files, 0700 directories (issue 32, residual risk "ledger and Prefect
database files are 0644").

The ledger holds who approved what and every node's history; Prefect's home holds its database and API settings;
reports quote alert labels. None is for other local users. One rule, applied in three places:

- `use_private_umask()` at process start (the `remedy` CLI): everything the process and its children create
  (SQLite files and their -wal/-shm, the Prefect server's home and database, reports, archives) is born private;
- `private_sqlite_file(path)` before SQLAlchemy opens a SQLite ledger: a file created here is 0600 even when a
  library embeds gpu-remedy without the CLI's umask;
- `private_dir(path)` for directories gpu-remedy makes (the Prefect home): 0700;
- `private_file(path)` before a file is opened for writing by a library that would create it under the process
  umask (the Prefect server's log); the Prefect server gpu-remedy starts runs under PRIVATE_UMASK itself
  (`remedy.prefect_server.start_server`), so its database and its -wal/-shm are 0600 whoever called it.

SQLite creates a database's -wal and -shm files with the database file's own mode, so a 0600 ledger keeps them
0600 (tests/safety/test_private_files.py checks both, on the ledger and on the Prefect server's database).

Files that already exist keep their mode: an operator who chose one wins.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_UMASK = 0o077  # no group/other bits on anything created
FILE_MODE = 0o600
DIR_MODE = 0o700


def use_private_umask() -> int:
    """Set the process umask to 0o077 (children inherit it); return the previous one."""
    return os.umask(PRIVATE_UMASK)


def private_dir(path: str | os.PathLike[str]) -> Path:
    """mkdir -p with 0700 for every directory this call creates; an existing directory is left as it is."""
    p = Path(path)
    missing = [d for d in (p, *p.parents) if not d.exists()]
    p.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    for d in missing:  # mkdir's mode is filtered by the umask, and parents get the default: set it outright
        os.chmod(d, DIR_MODE)
    return p


def private_sqlite_file(path: str | os.PathLike[str]) -> Path:
    """Create the SQLite file 0600 (and its directory 0700) if it does not exist yet; never loosen an existing one."""
    return private_file(path)


def private_file(path: str | os.PathLike[str]) -> Path:
    """Create the file empty, 0600 (and its directory 0700), if it does not exist yet; an existing one keeps its
    mode (an operator who chose one wins)."""
    p = Path(path)
    if not p.parent.exists():
        private_dir(p.parent)
    try:
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    except FileExistsError:
        return p
    os.close(fd)
    os.chmod(p, FILE_MODE)  # O_CREAT's mode is filtered by the umask too (an empty file is a valid new SQLite database)
    return p
