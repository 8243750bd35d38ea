"""A stopped run's kept state in the browser: its size, Resume on a version whose change
would misplace the state (refused in the panel, naming the parameter), and Discard state."""

from __future__ import annotations

import pytest

from tests.browser.conftest import run_page_open

pytestmark = pytest.mark.browser

# A stopped run with a checkpoint kept, and a version of its job keyed by another column.
_STOPPED = """
import copy, json, pathlib
from webapp.jobs.models import Run, Trigger
from webapp.jobs.services import job_version_create
run = Run.objects.get(pk={run_id})
checkpoint = pathlib.Path({checkpoint!r})
checkpoint.mkdir(parents=True, exist_ok=True)
(checkpoint / "run.json").write_text(json.dumps({{"run_id": "{run_id}", "start_ms": 0}}))
dag = copy.deepcopy(run.version.dag)
next(op for op in dag["operators"] if op["id"] == "counts")["params"]["key"] = ["user_id"]
job_version_create(job_id=run.job_id, dag=dag, base_version=run.version.number, actor=None,
                   trigger=Trigger.USER)
Run.objects.filter(pk=run.pk).update(status="stopped", checkpoint_location=str(checkpoint))
"""


def test_resume_refuses_an_unsafe_version_in_the_panel_and_discard_ends_resuming(
        stack, fed_run, signed_in):
    run_id, _ = fed_run("resume-panel", 5, feed=False)
    checkpoint = stack.var_dir / "runs" / str(run_id) / "checkpoint"
    stack.manage("shell", "-c", _STOPPED.format(run_id=run_id, checkpoint=str(checkpoint)))

    page = signed_in("operator")
    run_page_open(page, run_id)
    assert "0 bytes" in page.inner_text("[data-testid=kept-state]")
    page.select_option("#resume-version", index=0)  # the newest: another key
    page.click("#resume-run")
    refusal = page.wait_for_selector("#run-state [data-refused]", timeout=15_000)
    assert "param key changed: changing the key would misplace stored state" in \
        refusal.inner_text()
    assert page.inner_text("#run-status") == "stopped"

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#discard-state")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=kept-state]')"
        ".textContent.includes('cannot be resumed')", timeout=15_000)
    assert page.locator("#resume-run").count() == 0
    assert not checkpoint.exists()
