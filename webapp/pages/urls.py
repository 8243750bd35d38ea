from django.contrib.auth import views as auth_views
from django.urls import path

from webapp.accounts.throttle import ThrottledLoginView
from webapp.pages import editor, history, runs, users, views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.job_list, name="job-list"),
    path("jobs/new/", editor.job_new, name="job-new"),
    path("jobs/<int:job_id>/", views.job_detail, name="job-detail"),
    path("jobs/<int:job_id>/edit/", editor.job_edit, name="job-edit"),
    path("jobs/<int:job_id>/diff/", editor.job_diff, name="job-diff"),
    path("jobs/<int:job_id>/archive", views.job_archive_set, name="job-archive"),
    path("jobs/<int:job_id>/start", runs.start, name="job-start"),
    path("runs/<int:run_id>/", runs.run_detail, name="run-detail"),
    path("runs/<int:run_id>/series.json", runs.run_series, name="run-series"),
    path("runs/<int:run_id>/reconfigurations", runs.run_reconfiguration_list,
         name="run-reconfigurations"),
    path("runs/<int:run_id>/incidents", runs.run_incidents, name="run-incidents"),
    path("runs/<int:run_id>/epochs/", runs.run_epochs, name="run-epochs"),
    path("runs/<int:run_id>/exceptions/", runs.run_exceptions, name="run-exceptions"),
    path("runs/<int:run_id>/operators/<str:operator_id>/instances/", runs.run_instances,
         name="run-instances"),
    path("runs/<int:run_id>/autoscale", runs.run_autoscale_panel, name="run-autoscale-panel"),
    path("runs/<int:run_id>/autoscale/set", runs.autoscale, name="run-autoscale"),
    path("runs/<int:run_id>/scale/preview", runs.scale_preview, name="run-scale-preview"),
    path("runs/<int:run_id>/reconfigure", runs.reconfigure, name="run-reconfigure"),
    path("runs/<int:run_id>/stop", runs.stop, name="run-stop"),
    path("history/", history.history, name="history"),
    path("history.csv", history.history_csv, name="history-csv"),
    path("users/", users.users, name="users"),
    path("users/<int:user_id>/", users.user_update, name="user-update"),
]
