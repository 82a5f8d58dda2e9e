"""An idle worker's reply channel on Redis: quiet, and nothing lost.

channels-redis reads its channel with a 5 s blocking BZPOPMIN; a redis-py client
whose socket_timeout is not above that raises a timeout on every idle read. The
worker's channel must read again without a word, and a message sent after such timeouts
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

    from mcp_django.worker_channel import WorkerChannel

    redis_url = shared_services.redis()

    async def run() -> list[str]:
        worker = WorkerChannel()
        # A socket timeout below the blocking read's: every idle read times out client-side.
        worker.layer = RedisChannelLayer(
            hosts=[{"address": redis_url, "socket_timeout": 0.5}],
            prefix=redis_prefix("idle"),
        )
        seen: list[str] = []
        await worker.start()
        worker.on("mcp.updated", lambda message: seen.append(message["uri"]))
        try:
            await asyncio.sleep(2.5)  # several idle reads end in a timeout
            await worker.layer.send(worker.channel, {"type": "mcp.updated", "uri": "test://after-idle"})
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.05)
        finally:
            await worker.stop()
            await worker.layer.flush()
        return seen

    with caplog.at_level(logging.DEBUG, logger="mcp_django"):
        seen = asyncio.run(run())
    assert seen == ["test://after-idle"]
    # The channel's own lines only: the audit writer thread may meanwhile write a row that an
    # earlier test's live server queued after that test ended (it fails here, where this test
    # has no database), which says nothing of idle reads.
    noisy = [r for r in caplog.records if (r.levelno >= logging.WARNING or r.exc_info) and r.name != "mcp_django.audit"]
    assert not noisy, caplog.text


def test_the_documented_layer_config_reads_quietly() -> None:
    from channels_redis.core import RedisChannelLayer
    from django.conf import settings

    (host,) = settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"]
    # Above the blocking read's timeout: an idle read ends on Redis's side, not in the client.
    assert host["socket_timeout"] > RedisChannelLayer.brpop_timeout
