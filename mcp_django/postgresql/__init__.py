"""The PostgreSQL backend that answers at once while the database is away: see :mod:`.base`."""
