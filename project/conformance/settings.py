"""The demo plus the conformance suite's fixtures (the ``test_*`` tools, prompts and resources).

``make conformance``, the benchmarks and the test suite use it; ``make run`` serves
the demo without them: ``DJANGO_SETTINGS_MODULE=project.conformance.settings``.
"""

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS]
INSTALLED_APPS.insert(INSTALLED_APPS.index("project.demo"), "project.conformance")
