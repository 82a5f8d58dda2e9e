"""Django's PostgreSQL backend that answers at once while the database refuses connections.

``DATABASES["default"]["ENGINE"] = "mcp_django.postgresql"``: see :mod:`.base`.
"""
