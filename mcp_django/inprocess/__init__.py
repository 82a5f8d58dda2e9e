"""The in-process test client's machinery (the public names are in :mod:`mcp_django.testing`).

No serving code imports it (tests/test_seams.py checks): the client plugs in through the
seams any harness may use, ``lifecycle.host_thread`` (its sync work runs in the test's
thread, in the test's transaction), ``signals.observer`` (what happens inside each call)
and ``audit.inline`` (audit rows written in that transaction).
"""
