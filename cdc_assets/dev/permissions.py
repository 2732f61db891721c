"""Running PostgreSQL as root: initdb and postgres refuse root, so they run as the OS user postgres, whose
home for the data must be a folder that user can reach."""
from __future__ import annotations

import os
import pwd
import subprocess
import tempfile
from pathlib import Path


def ensure_os_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-r", "-M", name], check=True)


def postgres_home(base_dir: Path) -> Path:
    """`base_dir/postgres`, or, when the postgres OS user cannot pass through base_dir's parents (say it
    lives under /root), a directory under /tmp that `base_dir/postgres` links to: we do not loosen the
    permissions of directories we do not own. Restarts follow the link, so the data is kept; removing
    base_dir leaves the linked directory behind."""
    home = base_dir / "postgres"
    if home.exists():
        return home.resolve()
    if home.is_symlink():  # its /tmp target was cleaned away: start afresh
        home.unlink()
    if os.geteuid() != 0 or _others_can_reach(base_dir):
        return home
    elsewhere = Path(tempfile.mkdtemp(prefix="cdc-pg-"))
    home.symlink_to(elsewhere)
    return elsewhere


def _others_can_reach(path: Path) -> bool:
    path = path.resolve()
    if path.stat().st_uid == os.geteuid():
        path.chmod(path.stat().st_mode | 0o011)  # the caller's own servers dir: ours to open up
    return all(p.stat().st_mode & 0o001 for p in [path, *path.parents])
