from django.apps import AppConfig


class AutoscalingConfig(AppConfig):
    name = "webapp.autoscaling"
    label = "autoscaling"
