"""Each pytest-xdist worker's test database: a copy of one that the leg migrates once.

Four workers each migrating a database of their own spent 4 x 2.4 s of CPU at the start of
every leg (74 migrations, most of it Django rendering model states), on a machine of two cores.
Now the first worker to get there migrates a template, under a lock file, and every worker copies
it, as Django's own parallel runner copies its databases (``clone_test_db``): a SQLite file backed
up into the worker's in-memory database, or ``CREATE DATABASE ... TEMPLATE`` on PostgreSQL (about
0.15 s). The last worker to tear its database down drops the template.

Outside xdist, with ``--reuse-db`` or ``--nomigrations``, or when a test needs a serialized
rollback, tests/conftest.py sets the databases up as pytest-django does.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OldConfig = list[tuple[Any, str, bool]]


def applies(aliases: set[str], serialized_aliases: set[str]) -> bool:
    """Under xdist, for the one default database, with no test needing a serialized rollback."""
    if not os.environ.get("PYTEST_XDIST_TESTRUNUID") or not os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    if aliases != {"default"} or serialized_aliases:
        return False
    from django.db import connections

    return connections["default"].vendor in ("sqlite", "postgresql")


def _workers_file() -> Path:
    """This run's lock, which lists the workers whose databases are copies of the template."""
    return Path(tempfile.gettempdir()) / f"mcp-django-tests-{os.environ['PYTEST_XDIST_TESTRUNUID']}.workers"


@contextlib.contextmanager
def _locked() -> Iterator[Any]:
    with open(_workers_file(), "a+") as workers:
        fcntl.flock(workers, fcntl.LOCK_EX)
        try:
            workers.seek(0)
            yield workers
        finally:
            fcntl.flock(workers, fcntl.LOCK_UN)


def _template_name(connection: Any) -> str:
    if connection.vendor == "sqlite":
        return str(_workers_file().with_suffix(".sqlite3"))
    # One per run, whatever the worker: the xdist run's id, shortened to fit PostgreSQL's 63 bytes.
    return f"test_mcp_template_{os.environ['PYTEST_XDIST_TESTRUNUID'][:16]}"


def _migrate_template(connection: Any, template: str, verbosity: int) -> None:
    """Django's create_test_db, with the template for the test database's name."""
    test = connection.settings_dict["TEST"]
    saved = test.get("NAME")
    test["NAME"] = template
    try:
        connection.creation.create_test_db(verbosity=verbosity, autoclobber=True, serialize=False)
    except BaseException:
        connection.close()
        _drop(connection, template)  # half migrated: never a template
        raise
    finally:
        test["NAME"] = saved
    connection.close()


def _drop(connection: Any, template: str) -> None:
    if connection.vendor == "sqlite":
        with contextlib.suppress(FileNotFoundError):
            os.unlink(template)
        return
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(template)} WITH (FORCE)")


def _use(connection: Any, name: str) -> None:
    from django.conf import settings

    settings.DATABASES[connection.alias]["NAME"] = connection.settings_dict["NAME"] = name


def set_up(verbosity: int) -> OldConfig:
    """The worker's test database, copied from the template (made first if no worker has)."""
    from django.db import connections

    connection = connections["default"]
    old_name = connection.settings_dict["NAME"]
    template = _template_name(connection)
    worker = os.environ["PYTEST_XDIST_WORKER"]
    with _locked() as workers:
        if not workers.read().split():
            # No worker uses a template: this one makes it (the file lists a worker only once
            # the template it copied exists, and the last one out drops it).
            _migrate_template(connection, template, verbosity)
        target = connection.creation._get_test_db_name()
        if connection.vendor == "postgresql":
            _drop(connection, target)
            name = connection.ops.quote_name
            with connection.creation._nodb_cursor() as cursor:
                cursor.execute(f"CREATE DATABASE {name(target)} TEMPLATE {name(template)}")
            _use(connection, target)
        else:
            # The worker's in-memory database (Django's shared-cache name: its threads see it).
            _use(connection, target)
            connection.ensure_connection()
            source = sqlite3.connect(template)
            try:
                source.backup(connection.connection)
            finally:
                source.close()
        workers.write(f"{worker}\n")
    # What migrate does before migrating, as it would in this worker: the system checks against
    # this database (they also read its features, which tests then find known).
    from django.core.management.base import BaseCommand

    BaseCommand().check(databases=[connection.alias])
    return [(connection, old_name, True)]


def tear_down(old_config: OldConfig, verbosity: int) -> None:
    """The worker's database goes as Django's teardown drops it; the last worker drops the template."""
    from django.test.utils import teardown_databases

    connection = old_config[0][0]
    template = _template_name(connection)
    teardown_databases(old_config, verbosity=verbosity)
    worker = os.environ["PYTEST_XDIST_WORKER"]
    with _locked() as workers:
        left = [line for line in workers.read().split() if line != worker]
        workers.truncate(0)
        workers.write("".join(f"{line}\n" for line in left))
        workers.flush()
        if not left:
            _drop(connection, template)
            # A worker that opens the file after this makes a template of its own.
            os.unlink(_workers_file())
