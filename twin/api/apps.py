from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "twin.api"
    label = "api"
    verbose_name = "REST API"
