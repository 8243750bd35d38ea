"""A driver's JVM starts from the class archive: Spark's classes come from the archive's
mapped file, not from its jars, and another Java install is given no archive of this one's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.runtime.spark import class_archive
from engine.runtime.spark.session import project_root


def test_another_java_install_is_given_another_archive(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(class_archive.FOLDER_VARIABLE, str(tmp_path / "archives"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    this_java = class_archive.archive_path()
    other = tmp_path / "jdk" / "bin" / "java"
    other.parent.mkdir(parents=True)
    other.write_text("")
    monkeypatch.setenv("JAVA_HOME", str(other.parent.parent))
    assert this_java is not None and class_archive.archive_path() not in (None, this_java)
    assert class_archive.archive_path().parent == tmp_path / "archives"  # type: ignore[union-attr]


def test_without_an_archive_a_driver_starts_with_no_option(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(class_archive.FOLDER_VARIABLE, str(tmp_path))
    assert class_archive.driver_java_options() == ""


def test_an_archive_that_cannot_be_made_is_one_line_and_exit_1(tmp_path, monkeypatch,  # type: ignore[no-untyped-def]
                                                               capsys) -> None:
    from engine.runtime.cli import main_class_archive

    taken = tmp_path / "archives"
    taken.write_text("a file where the archives' folder should be")
    monkeypatch.setenv(class_archive.FOLDER_VARIABLE, str(taken))
    assert main_class_archive() == 1
    error = capsys.readouterr().err
    assert error.startswith("error: the JVM class archive was not made: ") and "\n" == error[-1:]
    assert error.count("\n") == 1


@pytest.mark.spark
def test_a_driver_loads_sparks_classes_from_the_archive(tmp_path: Path) -> None:
    # Made by `make install`: here only if it was not.
    made = subprocess.run([sys.executable, "-m", "engine", "class-archive"], cwd=project_root(),
                          capture_output=True, text=True, timeout=300)
    path = class_archive.archive_path()
    assert made.returncode == 0 and path is not None and path.is_file(), made.stderr
    assert f"JVM class archive: {path}" in made.stdout
    log = tmp_path / "classes.log"
    code = ("from engine.runtime.spark.session import build_session;"
            "from engine.runtime.spark.class_archive import driver_java_options;"
            f"build_session(java_options=driver_java_options() + ' -Xlog:class+load:file={log}')"
            ".range(3).count()")
    subprocess.run([sys.executable, "-c", code], cwd=project_root(), check=True,
                   timeout=300)
    sources = {line.split(" source: ")[-1].strip() for line in log.read_text().splitlines()
               if " org.apache.spark.SparkContext " in line}
    assert sources == {"shared objects file (top)"}, sources


@pytest.mark.spark
def test_the_expression_parsers_jvm_starts_from_the_archive() -> None:
    # In a process of its own: this one may have started its parser before the archive.
    code = ("from engine.runtime.spark import sql_parser;"
            "sql_parser.parse_expression_tree('amount > 1');"
            "bean = sql_parser._gateway.jvm.java.lang.management.ManagementFactory"
            ".getRuntimeMXBean();"
            "print(list(bean.getInputArguments()))")
    started = subprocess.run([sys.executable, "-c", code], cwd=project_root(),
                             capture_output=True, text=True, timeout=300, check=True)
    path = class_archive.archive_path()
    assert path is not None and path.is_file()
    assert f"-XX:SharedArchiveFile={path}" in started.stdout
