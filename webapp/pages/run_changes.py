"""The run page's controls for the reconfigurations beyond scaling: new params for a running
operator (with the state-safety verdict before applying), a rebalance of a keyed operator's
key groups (with its skew and the key groups each instance would own), and a move to the
job's newer version. Each panel is a fragment of the run page; every preview and every
request goes through the API's own services (``webapp.reconfigurations.services``)."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from webapp import engine_gateway
from webapp.accounts.access import page_requires
from webapp.accounts.roles import Permission
from webapp.errors import NotFound, ServiceError
from webapp.jobs.models import Trigger
from webapp.pages import selectors as page_selectors
from webapp.pages.forms import logic_body, param_text, param_widget
from webapp.pages.lookups import run_or_404
from webapp.reconfigurations import selectors
from webapp.reconfigurations.requests import MAX_REASON
from webapp.reconfigurations.services import (
    RECONFIGURABLE,
    reconfiguration_preview,
    reconfiguration_request,
)


def reconfiguration_outcome(request, run_id: int, body: dict):
    """The outcome fragment of a request through the API's service: the record, or the
    service's refusal; an accepted one refreshes the page's list of changes."""
    try:
        reconfiguration, created = reconfiguration_request(
            run_id=run_id, body=body, actor=request.user, trigger=Trigger.USER)
    except ServiceError as error:
        return render(request, "pages/partials/scale-outcome.html", {"error": error})
    response = render(request, "pages/partials/scale-outcome.html",
                      {"reconfiguration": reconfiguration, "created": created})
    response["HX-Trigger"] = "reconfigurations-changed"
    return response


def _panel(run) -> dict[str, Any]:
    return {"run": run, "live": run.status in RECONFIGURABLE, "reason_max": MAX_REASON,
            "request_id": uuid.uuid4().hex}


def run_change_panels(*, run) -> dict[str, Any]:
    """What the run page's three panels start from (for an operator of a live run)."""
    logic_ops = selectors.run_logic_operators(run=run)
    rebalance_ops = selectors.run_rebalance_operators(run=run)
    return {
        "logic": _logic_context(run, next((o["id"] for o in logic_ops if not o["refused"]),
                                          None)),
        "rebalance": _rebalance_context(run, next(
            (o["id"] for o in rebalance_ops if not o["refused"]),
            rebalance_ops[0]["id"] if rebalance_ops else None)),
        "move": version_move_context(run=run),
    }


# ---- new params for an operator ---------------------------------------------------------

def _logic_context(run, operator_id: str | None) -> dict[str, Any]:
    context = {**_panel(run), "operators": selectors.run_logic_operators(run=run)}
    if operator_id is not None:
        operator = selectors.operator_param_fields(run=run, operator_id=operator_id)
        for field in operator["fields"]:
            field["text"] = param_text(field["kind"], field["value"])
            field["default_text"] = param_text(field["kind"], field["default"])
            field["widget"] = param_widget(field["kind"])
            field["bound"] = _bound(field["maximum"])
        context["operator"] = operator
    return context


def _bound(maximum: float | None) -> dict[str, str] | None:
    """A param's upper bound as the number field takes it and as a person reads it."""
    if maximum is None:
        return None
    whole = float(maximum).is_integer()
    return {"attr": str(int(maximum)) if whole else str(maximum),
            "text": f"{int(maximum):,}" if whole else str(maximum)}


def _operator_panel(build, template: str, name: str, doc: str):
    """The view of a panel for the operator picked (``?operator=``), built by
    ``build(run, operator)`` into ``template`` as ``name``; no operator named is a 400 (the
    page's select always names one), an operator the panel cannot show is a 404."""

    @page_requires(Permission.OPERATE_RUNS)
    @require_GET
    def panel(request, run_id: int):
        run = run_or_404(run_id)
        operator_id = request.GET.get("operator", "").strip()
        if not operator_id:
            error = ("?operator= is missing or empty: name the operator to show, "
                     "e.g. ?operator=counts")
            return render(request, "pages/error.html", {"error": error}, status=400)
        try:
            context = build(run, operator_id)
        except NotFound as error:
            raise Http404(str(error)) from None
        return render(request, template, {name: context})

    panel.__doc__ = doc
    return panel


def preview_or_refusal(context: dict[str, Any], *, run_id: int, body: dict) -> dict[str, Any]:
    """``context`` with the service's preview of ``body``, or its refusal as ``error``."""
    try:
        context["preview"] = reconfiguration_preview(run_id=run_id, body=body)
    except ServiceError as error:
        context["error"] = error
    return context


logic_panel = _operator_panel(_logic_context, "pages/partials/logic-change.html", "logic",
                             "The params form of the operator picked.")


def _logic_request(request, run_id: int) -> dict[str, Any]:
    run = run_or_404(run_id)
    operator_id = request.POST.get("operator", "")
    try:
        operator = selectors.operator_param_fields(run=run, operator_id=operator_id)
    except NotFound:
        # Not one the form offers (a source, an unknown id): the service says why not.
        operator = {"id": operator_id, "type": None, "state_kind": None, "fields": []}
    return {"operator": operator, "body": logic_body(request.POST, operator["fields"])}


@page_requires(Permission.OPERATE_RUNS)
@require_POST
def logic_preview(request, run_id: int):
    """The verdict on the params typed: the plan change, or the service's refusal (the
    state-safety rule the driver applies too); Apply comes enabled only with the first."""
    found = _logic_request(request, run_id)
    context = preview_or_refusal({"operator": found["operator"]}, run_id=run_id,
                                 body={**found["body"], "reason": "preview"})
    return render(request, "pages/partials/logic-verdict.html", context)


@page_requires(Permission.OPERATE_RUNS)
@require_POST
def logic_apply(request, run_id: int):
    return reconfiguration_outcome(request, run_id, _logic_request(request, run_id)["body"])


# ---- rebalance --------------------------------------------------------------------------

def _rebalance_context(run, operator_id: str | None) -> dict[str, Any]:
    context = {**_panel(run), "operators": selectors.run_rebalance_operators(run=run)}
    if operator_id is not None:
        context["estimate"] = selectors.rebalance_estimate(run=run, operator_id=operator_id)
    return context


rebalance_panel = _operator_panel(
    _rebalance_context, "pages/partials/rebalance.html", "rebalance",
    "The skew of the keyed operator picked and its estimated rebalance.")


# ---- a newer version --------------------------------------------------------------------

def version_move_context(*, run) -> dict[str, Any]:
    """The job's newer version, what moving the run to it changes (the plan diff and the
    instances, or the service's refusal) and the version whose plan the run has now."""
    context = {**_panel(run), "plan_version": selectors.run_plan_version(run=run)}
    newer = selectors.run_newer_version(run=run)
    if newer is None or not context["live"]:
        return context
    context["version"] = newer
    if context["plan_version"] == newer.number:
        return context
    context["changes"] = engine_gateway.plan_diff(run.target_dag, newer.dag)["changes"]
    try:
        context["preview"] = reconfiguration_preview(run_id=run.pk, body={
            "kind": "rollback", "to_version": newer.number, "reason": "preview"})
        context["rows"], context["unchanged"] = page_selectors.preview_rows(context["preview"])
    except ServiceError as error:
        context["error"] = error
    return context


@page_requires(Permission.OPERATE_RUNS)
@require_GET
def version_move_panel(request, run_id: int):
    return render(request, "pages/partials/version-move.html",
                  {"move": version_move_context(run=run_or_404(run_id))})
