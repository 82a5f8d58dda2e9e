"""The in-process test client's machinery (the public names are in :mod:`mcp_django.testing`).

No serving code imports it (tests/test_seams.py checks): the client plugs in through the seams
any harness may use, ``lifecycle.host_thread``, ``signals.observer`` and ``audit.inline``.
"""
