from django.apps import AppConfig


class SamplesConfig(AppConfig):
    name = "webapp.samples"
    label = "samples"
