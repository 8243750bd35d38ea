from django.contrib.auth import views as auth_views
from django.urls import include, path

from webapp.accounts.throttle import ThrottledLoginView
from webapp.pages import drill, editor, history, run_changes, runs, users, views

# The pages of one job, under jobs/<job_id>/.
job_pages = [
    path("", views.job_detail, name="job-detail"),
    path("edit/", editor.job_edit, name="job-edit"),
    path("diff/", editor.job_diff, name="job-diff"),
    path("archive", views.job_archive_set, name="job-archive"),
    path("start", runs.start, name="job-start"),
]

# The pages of one run and the fragments its page loads, under runs/<run_id>/.
run_pages = [
    path("", runs.run_detail, name="run-detail"),
    path("series.json", runs.run_series, name="run-series"),
    path("reconfigurations", runs.run_reconfiguration_list, name="run-reconfigurations"),
    path("incidents", runs.run_incidents, name="run-incidents"),
    path("epochs/", runs.run_epochs, name="run-epochs"),
    path("exceptions/", runs.run_exceptions, name="run-exceptions"),
    path("operators/<str:operator_id>/instances/", runs.run_instances, name="run-instances"),
    path("operators/<str:operator_id>/series.json", drill.run_operator_series,
         name="run-operator-series"),
    path("sample", drill.run_sample_request, name="run-sample"),
    path("samples/<int:sample_id>", drill.run_sample, name="run-sample-answer"),
    path("stop", runs.stop, name="run-stop"),
    path("resume", runs.resume, name="run-resume"),
    path("state/discard", runs.state_discard, name="run-state-discard"),
]

# The run page's controls: scaling, the autoscaler and the other reconfigurations.
run_controls = [
    path("autoscale", runs.run_autoscale_panel, name="run-autoscale-panel"),
    path("autoscale/set", runs.autoscale, name="run-autoscale"),
    path("scale/preview", runs.scale_preview, name="run-scale-preview"),
    path("reconfigure", runs.reconfigure, name="run-reconfigure"),
    path("logic", run_changes.logic_panel, name="run-logic-panel"),
    path("logic/preview", run_changes.logic_preview, name="run-logic-preview"),
    path("logic/apply", run_changes.logic_apply, name="run-logic-apply"),
    path("rebalance", run_changes.rebalance_panel, name="run-rebalance-panel"),
    path("version-move", run_changes.version_move_panel, name="run-version-move"),
]

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.job_list, name="job-list"),
    path("jobs/new/", editor.job_new, name="job-new"),
    path("jobs/<int:job_id>/", include(job_pages)),
    path("runs/<int:run_id>/", include(run_pages + run_controls)),
    path("history/", history.history, name="history"),
    path("history.csv", history.history_csv, name="history-csv"),
    path("users/", users.users, name="users"),
    path("users/<int:user_id>/", users.user_update, name="user-update"),
]
