from django.apps import AppConfig

from project import lazy_imports

# Here, not in ready(): Django imports every installed app's configuration before any app's
# models, so this runs before oauth2_provider.models imports jwcrypto.jwk. Only OpenID
# Connect's keys use it (project/lazy_imports.py).
lazy_imports.defer("jwcrypto.jwk")


class DemoConfig(AppConfig):
    name = "project.demo"
    label = "demo"
    verbose_name = "Demo"
