"""The in-process test client's machinery (the client itself is :mod:`mcp_django.testing`). No
serving code imports it (tests/test_seams.py): the client plugs in through seams any harness may use.
"""
