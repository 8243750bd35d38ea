"""The OpenAPI document is generated from the API's routes and models: every route under /api/
is in it with each of its methods, the hot reads (answered without per-request validation) match
their models, and a body or query that fails its model is answered 400 naming the field."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tests.webapp.conftest import epoch_metrics
from webapp.accounts.roles import Role
from webapp.api.schema import JobOut, RunOut
from webapp.jobs.metrics import run_epoch_record

pytestmark = pytest.mark.django_db


def _api_routes(client) -> dict[str, set[str]]:
    """Every route of the URLconf under /api/ as an OpenAPI path, with the methods it answers
    (as its 405 to TRACE lists them)."""
    routes: dict[str, set[str]] = {}
    for top in get_resolver().url_patterns:
        if not (isinstance(top, URLResolver) and str(top.pattern) == "api/"):
            continue
        for pattern in top.url_patterns:
            assert isinstance(pattern, URLPattern)
            route = str(pattern.pattern)
            # The API's root (for reverse), the document and its interactive page.
            if route in ("", "schema", "docs"):
                continue
            refused = client.generic("TRACE", "/api/" + re.sub(r"<[^>]+>", "1", route))
            assert refused.status_code == 405, route
            methods = {m.strip().lower() for m in refused["Allow"].split(",")} - {"head"}
            path = "/api/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
            routes.setdefault(path, set()).update(methods)
    return routes


def test_every_api_route_and_method_is_in_the_document(client, token_client):
    document = client.get("/api/schema").json()
    routes = _api_routes(token_client(Role.VIEWER))
    assert len(routes) >= 15, routes
    for path, methods in routes.items():
        assert path in document["paths"], path
        assert methods == set(document["paths"][path]), (path, methods)
    assert set(document["paths"]) == set(routes)


def test_every_operation_names_its_models_and_auth(client):
    document = client.get("/api/schema").json()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            ok = [s for s in operation["responses"] if s.startswith("2")]
            assert len(ok) == 1 and "content" in operation["responses"][ok[0]], (path, method)
            for status in ("401", "403"):
                schema = operation["responses"][status]["content"]["application/json"]
                assert schema["schema"] == {"$ref": "#/components/schemas/ErrorOut"}
            assert operation["security"] == [{"BearerToken": []}, {"SessionCookie": []}]
            optional = ("/api/runs/{id}/stop", "/api/runs/{id}/resume")
            if method == "post" and path not in optional and not path.endswith("runs"):
                assert operation["requestBody"]["required"] is True, path
    schemes = document["components"]["securitySchemes"]
    assert schemes["BearerToken"] == {"type": "http", "scheme": "bearer"}
    assert schemes["SessionCookie"]["in"] == "cookie"


def test_the_reconfiguration_body_is_one_model_per_kind(client):
    document = client.get("/api/schema").json()
    body = document["paths"]["/api/runs/{id}/reconfigurations"]["post"]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    assert schema["discriminator"]["propertyName"] == "kind"
    assert set(schema["discriminator"]["mapping"]) == {
        "rescale", "scale_out", "scale_in", "rebalance", "logic", "rollback"}
    rescale = document["components"]["schemas"]["RescaleBody"]
    assert set(rescale["required"]) == {"kind", "operator", "parallelism", "reason"}
    assert rescale["properties"]["parallelism"]["minimum"] == 1


def test_the_schema_says_a_rollback_names_exactly_one_target(client, token_client, live_run):
    rollback = client.get("/api/schema").json()["components"]["schemas"]["RollbackBody"]
    targets = [set(choice["required"]) for choice in rollback["oneOf"]]
    assert targets == [{"to_reconfiguration"}, {"to_version"}]
    assert rollback["additionalProperties"] is False
    both = _post(token_client(Role.OPERATOR), f"/api/runs/{live_run.pk}/reconfigurations",
                 {"kind": "rollback", "to_reconfiguration": 1, "to_version": 1, "reason": "x"})
    assert both.status_code == 400
    assert "exactly one of to_reconfiguration or to_version" in both.json()["error"]


def test_validate_takes_any_object_and_names_its_problems(client, token_client):
    body = client.get("/api/schema").json()["paths"]["/api/validate"]["post"]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    assert (schema["type"], schema["additionalProperties"]) == ("object", True)
    assert "required" not in schema
    answer = _post(token_client(Role.VIEWER), "/api/validate", {"edges": []})
    assert answer.status_code == 200
    assert answer.json()["valid"] is False
    assert {"where": "document", "message": "'operators' must be a non-empty list"} in (
        answer.json()["problems"])


def test_the_hot_reads_answer_what_their_models_say(token_client, live_run):
    run_epoch_record(run_id=live_run.pk, metrics=epoch_metrics(0, counts_in=10,
                                                                counts_capacity=100))
    client = token_client(Role.VIEWER)
    run = client.get(f"/api/runs/{live_run.pk}").json()
    assert RunOut.model_validate(run).model_dump(mode="json")["metrics"]["epoch"] == 0
    job = client.get(f"/api/jobs/{live_run.job_id}").json()
    checked = JobOut.model_validate(job)
    assert checked.current_run.id == live_run.pk
    assert checked.versions[0].dag.operators[2].id == "counts"


def test_a_run_without_epochs_matches_its_model(token_client, live_run):
    run = token_client(Role.VIEWER).get(f"/api/runs/{live_run.pk}").json()
    assert RunOut.model_validate(run).metrics == {}


def _post(client, path, body):
    return client.post(path, data=json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(("body", "where", "message"), [
    ({"dag": {}, "base_version": "1"}, "field base_version", "must be a whole number"),
    ({"dag": {}, "base_version": True}, "field base_version", "must be a whole number"),
    ({"dag": {}, "base_version": -1}, "field base_version", "must be at least 0"),
    ({"dag": [], "base_version": 1}, "field dag", "must be a JSON object (a DAG document)"),
    ({"base_version": 1}, "field dag", "is required"),
    ({"dag": {}, "base_version": 1, "comment": "c" * 1001}, "field comment",
     "must be at most 1000 characters"),
    ({"dag": {}, "base_version": 1, "coment": "typo"}, "field coment", "is not a known field"),
])
def test_a_body_that_fails_its_model_is_a_400_naming_the_field(token_client, job, body, where,
                                                              message):
    answer = _post(token_client(Role.EDITOR), f"/api/jobs/{job.pk}/versions", body)
    assert answer.status_code == 400
    assert {"where": where, "message": message} in answer.json()["problems"]
    assert where.split()[-1] in answer.json()["error"]


def test_every_problem_of_a_body_is_listed(token_client):
    answer = _post(token_client(Role.ADMIN), "/api/users", {"username": "", "role": "king"})
    assert answer.status_code == 400
    wheres = {p["where"] for p in answer.json()["problems"]}
    assert wheres == {"field username", "field role"}


def test_a_reconfiguration_problem_names_the_field_not_the_kind(token_client, live_run):
    answer = _post(token_client(Role.OPERATOR), f"/api/runs/{live_run.pk}/reconfigurations",
                   {"kind": "scale_out", "instances": "2", "reason": "x"})
    assert answer.status_code == 400
    assert answer.json()["problems"] == [
        {"where": "field instances", "message": "must be a whole number"}]


def test_an_empty_body_is_named(token_client, job):
    answer = token_client(Role.EDITOR).post(f"/api/jobs/{job.pk}/versions", data=b"",
                                            content_type="application/json")
    assert answer.status_code == 400 and "body" in answer.json()["error"]


def test_a_query_parameter_out_of_bounds_is_named(token_client, job):
    answer = token_client(Role.VIEWER).get(f"/api/jobs/{job.pk}/history?page_size=0")
    assert answer.status_code == 400
    assert answer.json()["problems"] == [
        {"where": "query parameter page_size", "message": "must be at least 1"}]


def test_a_read_answers_head_and_a_wrong_method_is_a_json_405(token_client, job):
    client = token_client(Role.VIEWER)
    assert client.head(f"/api/jobs/{job.pk}").status_code == 200
    refused = client.delete("/api/jobs")
    assert refused.status_code == 405 and refused["Allow"] == "GET, HEAD, POST"
    assert refused.json()["problems"][0]["message"] == "use GET or HEAD or POST"


def test_refusals_of_the_role_rules_have_the_error_shape(token_client, client):
    anonymous = client.get("/api/jobs")
    assert anonymous.status_code == 401
    assert anonymous.json() == {"error": "authentication required", "problems": [
        {"where": "request", "message": "authentication required"}]}
    viewer = _post(token_client(Role.VIEWER), "/api/jobs", {"name": "x"})
    assert viewer.status_code == 403
    assert viewer.json()["error"] == "this needs the editor role or higher"


@pytest.mark.parametrize(("header", "message"), [
    ("Bearer not-a-token", "the API token is unknown or revoked"),
    ("Basic dXNlcjpwdw==", "the Authorization header must be 'Bearer <token>'"),
])
def test_a_refused_token_has_the_error_shape(client, header, message):
    answer = client.get("/api/jobs", HTTP_AUTHORIZATION=header)
    assert answer.status_code == 401
    assert answer.json() == {"error": message, "problems": [
        {"where": "header Authorization", "message": message}]}


def test_the_document_says_which_reconfigurations_need_a_reason(client):
    """A kind that needs a reason says so in the schema (a character other than white space),
    so that bodies generated from the document are taken; the others leave it optional."""
    schemas = client.get("/api/schema").json()["components"]["schemas"]
    for needed in ("RescaleBody", "ScaleBody", "RollbackBody", "SinkTargetHandOverIn"):
        reason = schemas[needed]["properties"]["reason"]
        assert "reason" in schemas[needed]["required"], needed
        assert (reason["minLength"], reason["pattern"]) == (1, r"\S"), needed
        assert re.search(reason["pattern"], " x ") and not re.search(reason["pattern"], " \t")
    for optional in ("RebalanceBody", "LogicBody"):
        assert "pattern" not in schemas[optional]["properties"]["reason"], optional


def test_a_blank_reason_the_document_refuses_is_refused_naming_it(token_client, live_run):
    answer = _post(token_client(Role.OPERATOR), f"/api/runs/{live_run.pk}/reconfigurations",
                   {"kind": "scale_out", "instances": 2, "reason": " \t "})
    assert answer.status_code == 400
    assert answer.json()["problems"] == [
        {"where": "field reason", "message": "is required for this kind of change: say why"}]


def test_an_optional_body_is_documented_as_the_object_it_is(client):
    """Left out or sent as an object: the document offers no JSON null, which is no object."""
    paths = client.get("/api/schema").json()["paths"]
    for path, model in (("/api/runs/{id}/stop", "RunStopIn"),
                        ("/api/jobs/{id}/runs", "RunStartIn")):
        body = paths[path]["post"]["requestBody"]
        assert body["required"] is False, path
        schema = body["content"]["application/json"]["schema"]
        assert schema in ({"$ref": f"#/components/schemas/{model}"},
                          {"allOf": [{"$ref": f"#/components/schemas/{model}"}]}), path


def test_a_whole_number_written_with_a_fraction_is_a_whole_number(token_client, live_run):
    """JSON Schema's integer includes 2.0: a field of whole numbers takes it, not 2.5."""
    client = token_client(Role.OPERATOR)
    path = f"/api/runs/{live_run.pk}/autoscale"
    taken = _post(client, path, {"mode": "recommend", "min": 1.0, "max": 2e0,
                                 "cooldown_s": 60.0})
    assert taken.status_code == 200, taken.json()
    assert (taken.json()["min"], taken.json()["max"], taken.json()["cooldown_s"]) == (1, 2, 60)
    refused = _post(client, path, {"mode": "recommend", "min": 1.5})
    assert refused.status_code == 400
    assert refused.json()["problems"] == [{"where": "field min",
                                           "message": "must be a whole number"}]


def test_the_document_says_a_job_graph_may_leave_its_name_out(client):
    """The engine names it "unnamed": a document without a name is taken, as the schema says."""
    dag = client.get("/api/schema").json()["components"]["schemas"]["DagDocument"]
    assert "name" not in dag["required"] and dag["properties"]["name"]["default"] == "unnamed"
