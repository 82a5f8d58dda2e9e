"""Django's PostgreSQL backend that answers at once while the database is away (refusing, or frozen).

``DATABASES["default"]["ENGINE"] = "mcp_django.postgresql"``: see :mod:`.base`.
"""
