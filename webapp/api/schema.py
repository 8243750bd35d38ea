"""The OpenAPI document of the JSON API, served at /api/schema."""

from __future__ import annotations

from typing import Any

_ERROR = {"description": "error", "content": {"application/json": {"schema": {
    "type": "object",
    "properties": {"error": {"type": "string"}, "problems": {"type": "array", "items": {
        "type": "object", "properties": {"where": {"type": "string"}, "message": {"type": "string"}}
    }}},
}}}}


def _op(summary: str, ok: str, *, body: bool = False, errors: tuple[str, ...] = ()) -> dict:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {ok: {"description": "success"}, "401": _ERROR, "403": _ERROR},
    }
    for status in errors:
        operation["responses"][status] = _ERROR
    if body:
        operation["requestBody"] = {
            "required": True, "content": {"application/json": {"schema": {"type": "object"}}}
        }
    return operation


def _job_id() -> list[dict]:
    return [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}]


_RECONFIGURATION_BODY = (
    "kind rescale {operator, parallelism}, scale_out / scale_in {instances}, rebalance "
    "{operator, assignment}, logic {operator, params} or rollback {to_reconfiguration | "
    "to_version}; with reason (required for scaling and rollback) and request_id (idempotency)"
)


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "streamscale API", "version": "1"},
        "components": {"securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "session": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
        }},
        "security": [{"bearer": []}, {"session": []}],
        "paths": {
            "/api/users": {
                "post": _op("create a user {username, role, password?, token?} (admins)", "201",
                            body=True, errors=("400", "409")),
            },
            "/api/jobs": {
                "get": _op("list jobs", "200"),
                "post": _op("create a job from a DAG document", "201", body=True,
                            errors=("400", "409")),
            },
            "/api/jobs/{id}": {
                "parameters": _job_id(),
                "get": _op("the job, its versions and its current run", "200", errors=("404",)),
            },
            "/api/jobs/{id}/versions": {
                "parameters": _job_id(),
                "post": _op("add a version: {dag, base_version, comment}", "201", body=True,
                            errors=("400", "404", "409")),
            },
            "/api/jobs/{id}/history": {
                "parameters": _job_id(),
                "get": _op("the audit trail of the job", "200", errors=("404",)),
            },
            "/api/catalog": {"get": _op("operator types and their param schemas", "200")},
            "/api/validate": {
                "post": _op("validate a DAG document: problems, plan, columns", "200", body=True,
                            errors=("400",)),
            },
            "/api/jobs/{id}/runs": {
                "parameters": _job_id(),
                "post": _op("start a run of a version {version?} (latest by default)", "202",
                            body=True, errors=("400", "404", "409")),
            },
            "/api/runs/{id}": {
                "parameters": _job_id(),
                "get": _op("status, epoch, parallelism and latest metrics", "200",
                           errors=("404",)),
            },
            "/api/runs/{id}/stop": {
                "parameters": _job_id(),
                "post": _op("stop the run after its current epoch", "202", errors=("404", "409")),
            },
            "/api/runs/{id}/reconfigurations": {
                "parameters": _job_id(),
                "get": _op("the run's reconfigurations", "200", errors=("404",)),
                "post": _op(_RECONFIGURATION_BODY, "202", body=True,
                            errors=("400", "404", "409")),
            },
            "/api/runs/{id}/reconfigurations/preview": {
                "parameters": _job_id(),
                "post": _op("plan diff and predicted effect of a request, recording nothing",
                            "200", body=True, errors=("400", "404", "409")),
            },
            "/api/runs/{id}/metrics": {
                "parameters": [*_job_id(), {"name": "since_epoch", "in": "query",
                                            "schema": {"type": "integer"}}],
                "get": _op("per-epoch, per-operator metrics with ETP", "200",
                           errors=("400", "404")),
            },
            "/api/runs/{id}/autoscale": {
                "parameters": _job_id(),
                "post": _op("autoscaler mode {mode: off|recommend|auto, min?, max?, "
                            "cooldown_s?}", "200", body=True, errors=("400", "404")),
            },
            "/api/reconfigurations/{id}": {
                "parameters": _job_id(),
                "get": _op("status, applied epoch, timings, state bytes moved, before/after",
                           "200", errors=("404",)),
            },
        },
    }
