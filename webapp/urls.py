from django.urls import include, path, re_path, register_converter

from webapp.api import runs as run_api
from webapp.api import views as api
from webapp.api.http import ApiIdConverter, not_found

register_converter(ApiIdConverter, "id")

urlpatterns = [
    path("", include("webapp.pages.urls")),
    path("api/schema", api.schema, name="api-schema"),
    path("api/users", api.users, name="api-users"),
    path("api/catalog", api.catalog, name="api-catalog"),
    path("api/validate", api.validate, name="api-validate"),
    path("api/jobs", api.jobs, name="api-jobs"),
    path("api/jobs/<id:job_id>", api.job_detail, name="api-job"),
    path("api/jobs/<id:job_id>/versions", api.job_versions, name="api-job-versions"),
    path("api/jobs/<id:job_id>/history", api.job_history, name="api-job-history"),
    path("api/jobs/<id:job_id>/runs", run_api.job_runs, name="api-job-runs"),
    path("api/runs/<id:run_id>", run_api.run_detail, name="api-run"),
    path("api/runs/<id:run_id>/stop", run_api.run_stop_view, name="api-run-stop"),
    path("api/runs/<id:run_id>/reconfigurations", run_api.run_reconfigurations,
         name="api-run-reconfigurations"),
    path("api/runs/<id:run_id>/reconfigurations/preview", run_api.run_reconfiguration_preview,
         name="api-run-reconfiguration-preview"),
    path("api/runs/<id:run_id>/metrics", run_api.run_metrics, name="api-run-metrics"),
    path("api/runs/<id:run_id>/autoscale", run_api.run_autoscale, name="api-run-autoscale"),
    path("api/reconfigurations/<id:reconfiguration_id>", run_api.reconfiguration_detail,
         name="api-reconfiguration"),
    re_path(r"^api(/|$)", not_found, name="api-not-found"),
]
