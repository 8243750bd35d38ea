from django.urls import path

from webapp.live.consumers import JobConsumer, RunConsumer

websocket_urlpatterns = [
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
]
