"""The class-data archive a driver's JVM starts from.

Most of a driver's start is its JVM loading and verifying Spark's classes. Java's dynamic
class-data sharing keeps those classes in an archive that a later JVM maps instead: the
archive is made once by running the standby's warm-up job in a JVM started with
``-XX:ArchiveClassesAtExit`` (``python -m engine class-archive``, which ``make install``
runs), and every session built after it starts from it.

An archive fits one Java and one PySpark install (the JVM checks the classpath it was made
with), so its file name carries a digest of both and another install finds none and starts
as before. It lives beside the Python environment that holds PySpark
(``<sys.prefix>/share/streamscale``, or ``STREAMSCALE_CLASS_ARCHIVE_DIR``): it goes with it,
and nothing is lost with it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pyspark

FOLDER_VARIABLE = "STREAMSCALE_CLASS_ARCHIVE_DIR"


def archive_folder() -> Path:
    """Where archives are kept."""
    return Path(os.environ.get(FOLDER_VARIABLE) or Path(sys.prefix) / "share" / "streamscale")


def archive_path() -> Path | None:
    """The archive for this machine's Java and PySpark, whether made yet or not; None when no
    Java is found (then Spark itself says so)."""
    java = _java()
    if java is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    facts = [os.path.realpath(java), str(os.stat(java).st_mtime_ns), pyspark.__version__,
             str(jars.resolve()), *sorted(p.name for p in jars.glob("*.jar"))]
    digest = hashlib.sha256("\n".join(facts).encode()).hexdigest()[:16]
    return archive_folder() / f"spark-{digest}.jsa"


def driver_java_options() -> str:
    """The JVM options that start a driver from the archive, or none when it is not made."""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    # -Xshare:auto: a JVM that cannot map it (another classpath) starts without it.
    return f"-XX:SharedArchiveFile={path} -Xshare:auto"


def make_archive(run_and_exit: Callable[[str], None]) -> Path | None:
    """Makes the archive unless it is there, and returns its path. ``run_and_exit`` starts a
    JVM with the JVM options it is given, runs the classes to keep and lets the JVM exit
    (which is when the JVM writes the archive). Another process making it at the same time
    is waited for, not repeated."""
    path = archive_path()
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.is_file():
            partial = path.with_suffix(f".{os.getpid()}.partial")
            # The only lines it would print are warnings for the classes it cannot keep.
            run_and_exit(f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off -Xlog:cds+dynamic=off")
            if not partial.is_file():
                raise RuntimeError(f"the JVM wrote no class archive to {partial}")
            os.replace(partial, path)
        for old in [*path.parent.glob("spark-*.jsa"), *path.parent.glob("spark-*.partial")]:
            if old != path:
                old.unlink()  # another Java's, or a dead maker's: none is in use
    return path


def _java() -> str | None:
    # The java that spark-submit runs: JAVA_HOME's, else the first on PATH.
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else shutil.which("java")
