from django.apps import AppConfig


class PagesConfig(AppConfig):
    name = "webapp.pages"
    label = "pages"
