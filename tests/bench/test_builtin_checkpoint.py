"""The baseline queries' scratch checkpoint: removed even when Spark writes into it late."""

from __future__ import annotations

import os
import shutil

import pytest

from bench import builtin
from bench.builtin import builtin_checkpoint


def test_a_checkpoint_written_into_after_its_query_stopped_is_still_removed(monkeypatch):
    remove, calls = shutil.rmtree, []

    def late_snapshot(path):
        calls.append(path)
        if len(calls) == 1:  # Spark's maintenance thread wrote a snapshot meanwhile
            raise OSError(39, "Directory not empty", "0")
        remove(path)

    monkeypatch.setattr(builtin.shutil, "rmtree", late_snapshot)
    monkeypatch.setattr(builtin.time, "sleep", lambda s: None)
    with builtin_checkpoint("bench-test-") as folder:
        os.makedirs(os.path.join(folder, "state", "0"))
    assert len(calls) == 2 and not os.path.exists(folder)


def test_a_checkpoint_that_cannot_be_removed_says_so(monkeypatch):
    remove = shutil.rmtree

    def never(path):
        raise OSError(39, "Directory not empty", path)

    monkeypatch.setattr(builtin.shutil, "rmtree", never)
    monkeypatch.setattr(builtin.time, "sleep", lambda s: None)
    with pytest.raises(OSError, match="not empty"), builtin_checkpoint("bench-test-") as folder:
        pass
    monkeypatch.undo()
    remove(folder)
