from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # The same endpoint through Django's view stack, for WSGI deployments. Under
    # ASGI, project/asgi.py routes /mcp to the fast application before Django sees it.
    path("", include("mcp_django.urls")),
]
