from django.apps import AppConfig


class ReconfigurationsConfig(AppConfig):
    name = "webapp.reconfigurations"
    label = "reconfigurations"
