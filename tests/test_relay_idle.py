"""An idle worker's reply channel on Redis: quiet, and nothing lost.

channels-redis reads its channel with a 5 s blocking BZPOPMIN; a redis-py client
whose socket_timeout is not above that raises a timeout on every idle read. The
relay must read again without a word, and a message sent after such timeouts
must still arrive. (Runs on the PostgreSQL + Redis leg, where REDIS_URL is set.)
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests import shared_services
from tests.run_names import redis_prefix

pytestmark = shared_services.needs_redis


def test_idle_reads_are_quiet_and_lose_nothing(caplog: pytest.LogCaptureFixture) -> None:
    from channels_redis.core import RedisChannelLayer

    from mcp_django.transports.relay import Relay

    redis_url = shared_services.redis()

    async def run() -> list[str]:
        relay = Relay()
        # A socket timeout below the blocking read's: every idle read times out client-side.
        relay.layer = RedisChannelLayer(
            hosts=[{"address": redis_url, "socket_timeout": 0.5}],
            prefix=redis_prefix("idle"),
        )
        seen: list[str] = []
        await relay.start()
        relay.watch(seen.append)
        try:
            await asyncio.sleep(2.5)  # several idle reads end in a timeout
            await relay.layer.send(relay.channel, {"type": "mcp.updated", "uri": "test://after-idle"})
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.05)
        finally:
            await relay.stop()
            await relay.layer.flush()
        return seen

    with caplog.at_level(logging.DEBUG, logger="mcp_django"):
        seen = asyncio.run(run())
    assert seen == ["test://after-idle"]
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert not noisy, caplog.text


def test_the_documented_layer_config_reads_quietly() -> None:
    from channels_redis.core import RedisChannelLayer
    from django.conf import settings

    (host,) = settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"]
    # Above the blocking read's timeout: an idle read ends on Redis's side, not in the client.
    assert host["socket_timeout"] > RedisChannelLayer.brpop_timeout
