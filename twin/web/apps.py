from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "twin.web"
    label = "web"
    verbose_name = "Dashboard"
