"""Rate limits and caps on what one caller holds open: a plug-in on the pipeline (docs/limits.md).

- :mod:`.rates` reads a rate such as ``"100/min"`` (DRF's ``SimpleRateThrottle.parse_rate``);
- :mod:`.counter` counts calls per window in the shared cache, bounded in time, behind a breaker;
- :mod:`.stage` is the pipeline stage (``limit(next, call)``) and the refusal clients see;
- :mod:`.checks` the system checks.

Imports nothing, so :mod:`mcp_django.conf` reads rates without loading the stage.
"""
