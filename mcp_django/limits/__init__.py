"""Rate limits and caps on what one caller holds open: a plug-in on the pipeline (docs/limits.md).
Imports nothing, so :mod:`mcp_django.conf` reads rates without loading the stage."""
