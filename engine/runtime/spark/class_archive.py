"""The class-data archive a driver's JVM starts from: Spark's classes, loaded and verified
once by a JVM that ran the standby's warm-up job and wrote them at its exit
(``-XX:ArchiveClassesAtExit``; ``python -m engine class-archive``, which ``make install`` runs),
then mapped by every later JVM. Its name carries a digest of the Java and PySpark installs it
fits; it is kept beside the Python environment (``STREAMSCALE_CLASS_ARCHIVE_DIR`` to move it).
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


def archive_path() -> Path | None:
    """The archive for this Java and PySpark, made or not; None without a java."""
    java = _java()
    if java is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    facts = [os.path.realpath(java), str(os.stat(java).st_mtime_ns), pyspark.__version__,
             str(jars.resolve()), *sorted(p.name for p in jars.glob("*.jar"))]
    digest = hashlib.sha256("\n".join(facts).encode()).hexdigest()[:16]
    folder = os.environ.get(FOLDER_VARIABLE) or Path(sys.prefix) / "share" / "streamscale"
    return Path(folder) / f"spark-{digest}.jsa"


def driver_java_options() -> str:
    """The JVM options that start a driver from the archive, or none when it is not made."""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    # -Xshare:auto: a JVM that cannot map it (another classpath) starts without it.
    return f"-XX:SharedArchiveFile={path} -Xshare:auto"


def make_archive(run_and_exit: Callable[[str], None]) -> Path | None:
    """The archive, made unless it is (a maker at work is waited for): ``run_and_exit`` runs
    a JVM with the options it is given, loads the classes to keep and lets the JVM exit."""
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
