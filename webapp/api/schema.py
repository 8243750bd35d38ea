"""The OpenAPI document of the JSON API, served at /api/schema."""

from __future__ import annotations

from typing import Any

_ERROR = {"description": "error", "content": {"application/json": {"schema": {
    "type": "object",
    "properties": {"error": {"type": "string"}, "problems": {"type": "array", "items": {
        "type": "object", "properties": {"where": {"type": "string"}, "message": {"type": "string"}}
    }}},
}}}}


def _op(summary: str, ok: str, *, body: str | None = None,
        errors: tuple[str, ...] = ()) -> dict:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {ok: {"description": "success"}, "401": _ERROR, "403": _ERROR,
                      "405": _ERROR},
    }
    for status in errors:
        operation["responses"][status] = _ERROR
    if body is not None:
        operation["responses"]["413"] = _ERROR
        operation["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{body}"}}}}
    return operation


def _job_id() -> list[dict]:
    return [{"name": "id", "in": "path", "required": True,
             "schema": {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}}]


def _paged() -> list[dict]:
    """`page` (from 1) and `page_size` (1..500, default 50); answers carry
    page {number, size, next} with next null on the last page."""
    return [*_job_id(),
            {"name": "page", "in": "query", "schema": {"type": "integer", "minimum": 1}},
            {"name": "page_size", "in": "query",
             "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}}]


_RECONFIGURATION_BODY = (
    "kind rescale {operator, parallelism}, scale_out / scale_in {instances}, rebalance "
    "{operator, assignment}, logic {operator, params} or rollback {to_reconfiguration | "
    "to_version}; with reason (required for scaling and rollback) and request_id (idempotency)"
)


_INT = {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
_DAG_EXAMPLE = {
    "name": "campaign-views", "key_groups": 16,
    "operators": [
        {"id": "events", "type": "source.generator", "params": {"rows_per_second": 100}},
        {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
        {"id": "out", "type": "sink.memory", "params": {}},
    ],
    "edges": [{"from": "events", "to": "views"}, {"from": "views", "to": "out"}],
}
BODY_SCHEMAS: dict[str, Any] = {
    "Dag": {
        "type": "object", "required": ["name", "operators"], "example": _DAG_EXAMPLE,
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 200},
            "key_groups": {"type": "integer", "minimum": 1, "maximum": 32768},
            "operators": {"type": "array", "minItems": 1, "maxItems": 500, "items": {
                "type": "object", "required": ["id", "type"],
                "properties": {
                    "id": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,63}$"},
                    "type": {"type": "string", "enum": [
                        "source.generator", "source.rate", "source.files", "filter", "map",
                        "window_aggregate", "join", "dedupe", "sink.postgres", "sink.files",
                        "sink.memory"]},
                    "parallelism": {"type": "integer", "minimum": 1, "maximum": 32768},
                    "params": {"type": "object"},
                },
            }},
            "edges": {"type": "array", "maxItems": 2000, "items": {
                "type": "object", "required": ["from", "to"],
                "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
            }},
        },
    },
    "Version": {
        "type": "object", "required": ["dag", "base_version"],
        "properties": {"dag": {"$ref": "#/components/schemas/Dag"}, "base_version": _INT,
                       "comment": {"type": "string", "maxLength": 1000}},
    },
    "User": {
        "type": "object", "required": ["username", "role"],
        "properties": {"username": {"type": "string", "minLength": 1, "maxLength": 150},
                       "role": {"type": "string",
                                "enum": ["viewer", "editor", "operator", "admin"]},
                       "password": {"type": "string", "maxLength": 128},
                       "token": {"type": "boolean"}},
    },
    "RunStart": {"type": "object", "properties": {"version": _INT}},
    "Reconfiguration": {
        "type": "object", "required": ["kind"],
        "properties": {
            "kind": {"type": "string", "enum": ["rescale", "scale_out", "scale_in", "rebalance",
                                                "logic", "rollback"]},
            "operator": {"type": "string", "maxLength": 64},
            "parallelism": {"type": "integer", "minimum": 1, "maximum": 32768},
            "instances": {"type": "integer", "minimum": 1, "maximum": 32768},
            "assignment": {"oneOf": [{"type": "string", "enum": ["weighted"]},
                                     {"type": "array", "maxItems": 32768,
                                      "items": {"type": "integer", "minimum": 0}}]},
            "params": {"type": "object"},
            "to_reconfiguration": _INT, "to_version": _INT,
            "reason": {"type": "string", "maxLength": 2000},
            "request_id": {"type": "string", "minLength": 1, "maxLength": 100},
        },
    },
    "Autoscale": {
        "type": "object", "required": ["mode"],
        "properties": {"mode": {"type": "string", "enum": ["off", "recommend", "auto"]},
                       "min": {"type": "integer", "minimum": 1, "maximum": 32768},
                       "max": {"type": "integer", "minimum": 1, "maximum": 32768},
                       "cooldown_s": {"type": "integer", "minimum": 1, "maximum": 86400}},
    },
}
"""Typed request bodies, with their limits, so clients (and fuzzers) reach valid requests."""


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "streamscale API", "version": "1"},
        "components": {"securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "session": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
        }, "schemas": BODY_SCHEMAS},
        "security": [{"bearer": []}, {"session": []}],
        "paths": {
            "/api/users": {
                "post": _op("create a user {username, role, password?, token?} (admins)", "201",
                            body="User", errors=("400", "409")),
            },
            "/api/jobs": {
                "get": _op("list jobs", "200"),
                "post": _op("create a job from a DAG document", "201", body="Dag",
                            errors=("400", "409")),
            },
            "/api/jobs/{id}": {
                "parameters": _job_id(),
                "get": _op("the job, its versions and its current run", "200", errors=("404",)),
            },
            "/api/jobs/{id}/versions": {
                "parameters": _job_id(),
                "post": _op("add a version: {dag, base_version, comment}", "201", body="Version",
                            errors=("400", "404", "409")),
            },
            "/api/jobs/{id}/history": {
                "parameters": _paged(),
                "get": _op("the audit trail of the job, newest first, one page", "200",
                           errors=("400", "404")),
            },
            "/api/catalog": {"get": _op("operator types and their param schemas", "200")},
            "/api/validate": {
                "post": _op("validate a DAG document: problems, plan, columns", "200", body="Dag",
                            errors=("400",)),
            },
            "/api/jobs/{id}/runs": {
                "parameters": _paged(),
                "get": _op("the job's runs, newest first, one page", "200", errors=("400", "404")),
                "post": _op("start a run of a version {version?} (latest by default)", "202",
                            body="RunStart", errors=("400", "404", "409")),
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
                "parameters": _paged(),
                "get": _op("the run's reconfigurations, newest first, one page", "200",
                           errors=("400", "404")),
                "post": _op(_RECONFIGURATION_BODY, "202", body="Reconfiguration",
                            errors=("400", "404", "409")),
            },
            "/api/runs/{id}/reconfigurations/preview": {
                "parameters": _job_id(),
                "post": _op("plan diff and predicted effect of a request, recording nothing",
                            "200", body="Reconfiguration", errors=("400", "404", "409")),
            },
            "/api/runs/{id}/metrics": {
                "parameters": [*_job_id(),
                               {"name": "since_epoch", "in": "query", "schema": _INT},
                               {"name": "limit", "in": "query", "schema": {
                                   "type": "integer", "minimum": 1, "maximum": 500,
                                   "default": 500}}],
                "get": _op("per-epoch, per-operator metrics with ETP from since_epoch, at most "
                           "limit epochs; next_since_epoch gives the next page (null at the "
                           "end). Epochs past METRICS_FULL_RESOLUTION_S are kept as one-minute "
                           "roll-ups only", "200", errors=("400", "404")),
            },
            "/api/runs/{id}/autoscale": {
                "parameters": _job_id(),
                "post": _op("autoscaler mode {mode: off|recommend|auto, min?, max?, "
                            "cooldown_s?}", "200", body="Autoscale", errors=("400", "404")),
            },
            "/api/reconfigurations/{id}": {
                "parameters": _job_id(),
                "get": _op("status, applied epoch, timings, state bytes moved, before/after",
                           "200", errors=("404",)),
            },
        },
    }
