"""Where the watcher keeps a warm standby: on a local master while ``WARM_STANDBY`` is on, and
on a standalone cluster only with ``WARM_STANDBY_CLUSTER`` (its application holds executors
the cluster must spare). The standby's own start and takeover are tested on whole stacks
(test_standby.py); here its spawn is recorded instead of run."""

from __future__ import annotations

import pytest

from webapp.runs import standby

CLUSTER = "spark://127.0.0.1:7077"


@pytest.fixture
def spawned(settings, tmp_path, monkeypatch) -> list[list[str]]:
    settings.VAR_DIR = tmp_path
    settings.WARM_STANDBY = True
    calls: list[list[str]] = []
    monkeypatch.setattr(standby, "driver_spawn",
                        lambda *, args, **_: calls.append(args) or 4242)
    return calls


@pytest.mark.parametrize(("master", "on_cluster", "kept"), [
    ("local[2]", False, True),
    (CLUSTER, False, False),
    (CLUSTER, True, True),
])
def test_a_standby_is_kept_where_the_settings_say(settings, spawned, master, on_cluster,
                                                    kept) -> None:
    settings.WARM_STANDBY_CLUSTER = on_cluster
    said = standby.standby_keep(env={}, master=master, starting=False)
    assert (said == "standby driver 4242 started") is kept
    assert len(spawned) == int(kept)


def test_no_standby_starts_while_a_run_starts(settings, spawned) -> None:
    settings.WARM_STANDBY_CLUSTER = True
    assert standby.standby_keep(env={}, master=CLUSTER, starting=True) is None
    assert spawned == []
