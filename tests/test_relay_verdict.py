"""The reply-forwarding protocol between two workers: "delivered" and "reported" agree.

A reply POSTed to worker B for an ask held by worker A travels to A, and B answers
its client 202 only once A says it took the reply. When A's acknowledgment is lost
on the way (a pooled Redis connection that died with an outage, say), B must not
answer 503 for a reply A's ask received; when the reply itself is lost, A's ask
fails and B answers 503, and the reply arriving late is not taken after all.

Two relays on a network of the test's own, which can lose or hold messages: the
protocol, without Redis and its timing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from mcp_django.protocol.jsonrpc import MCPError, Unavailable
from mcp_django.transports import relay as relay_module
from mcp_django.transports.relay import Relay

SID, PRINCIPAL = "session-1", "principal-1"


class Network:
    """Workers' channels; ``lose`` says which messages never arrive, ``hold`` which wait for release()."""

    def __init__(self) -> None:
        self.workers: dict[str, FakeWorker] = {}
        self.lose: Callable[[dict[str, Any]], bool] = lambda message: False
        self.hold: Callable[[dict[str, Any]], bool] = lambda message: False
        self.held: list[tuple[str, dict[str, Any]]] = []
        self.sent: list[str] = []

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        self.sent.append(message["type"])
        if self.lose(message):
            return  # sent, never arrives
        if self.hold(message):
            self.held.append((channel, message))
            return
        asyncio.get_running_loop().call_soon(self.workers[channel].receive, message)

    def release(self) -> None:
        for channel, message in self.held:
            asyncio.get_running_loop().call_soon(self.workers[channel].receive, message)
        self.held.clear()


class FakeWorker:
    """What a relay uses of its worker's channel."""

    shared = True

    def __init__(self, network: Network, name: str) -> None:
        self.network = network
        self.channel = f"mcp-django.{name}!0"
        self.handlers: dict[str, Callable[[dict[str, Any]], None]] = {}
        self.tasks: set[asyncio.Future[Any]] = set()
        self.layer = self  # the relay's older code sent through worker.layer
        self.loop = None
        network.workers[self.channel] = self

    def on(self, message_type: str, handler: Callable[[dict[str, Any]], None]) -> None:
        self.handlers[message_type] = handler

    def receive(self, message: dict[str, Any]) -> None:
        self.handlers[message["type"]](message)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await self.network.send(channel, message)

    def post(self, channel: str, message: dict[str, Any]) -> None:
        async def send() -> None:
            with contextlib.suppress(Exception):
                await self.send(channel, message)

        self.keep(asyncio.ensure_future(send()))

    def keep(self, task: asyncio.Future[Any]) -> None:
        self.tasks.add(task)


@pytest.fixture(autouse=True)
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relay_module, "REPLY_ACK_SECONDS", 0.2)
    monkeypatch.setattr(relay_module, "REPLY_VERDICT_SECONDS", 1)


def _pair() -> tuple[Network, Relay, Relay]:
    network = Network()
    holder = Relay(FakeWorker(network, "a"))  # type: ignore[arg-type]
    forwarder = Relay(FakeWorker(network, "b"))  # type: ignore[arg-type]
    return network, holder, forwarder


def _reply(request_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"action": "decline"}}


def test_a_delivered_reply_whose_ack_is_lost_is_reported_delivered() -> None:
    async def run() -> None:
        network, holder, forwarder = _pair()
        lost_once = []

        def lose_first_ack(message: dict[str, Any]) -> bool:
            if message["type"] == "mcp.reply.ack" and not lost_once:
                lost_once.append(message)
                return True
            return False

        network.lose = lose_first_ack
        request_id, asked = holder.replies(SID, PRINCIPAL).open()
        # The ask got its reply; the client must hear 202, not 503.
        assert await forwarder.route_reply(_reply(request_id), SID, PRINCIPAL) is True
        assert lost_once and asked.done() and asked.result() == _reply(request_id)
        assert "mcp.reply.lost" in network.sent  # the forwarder asked instead of concluding

    asyncio.run(run())


def test_a_reply_lost_on_the_way_fails_the_ask_and_is_reported_failed() -> None:
    async def run() -> None:
        network, holder, forwarder = _pair()
        network.lose = lambda message: message["type"] == "mcp.reply"
        request_id, asked = holder.replies(SID, PRINCIPAL).open()
        with pytest.raises(Unavailable):
            await forwarder.route_reply(_reply(request_id), SID, PRINCIPAL)
        # The ask ends now, with an error (not at ASK_TIMEOUT).
        await asyncio.sleep(0)
        assert asked.done() and isinstance(asked.exception(), MCPError)

    asyncio.run(run())


def test_a_reply_arriving_after_it_was_declared_lost_is_not_taken() -> None:
    async def run() -> None:
        network, holder, forwarder = _pair()
        # The reply is late (held), the forwarder's question overtakes it.
        network.hold = lambda message: message["type"] == "mcp.reply"
        request_id, asked = holder.replies(SID, PRINCIPAL).open()
        with pytest.raises(Unavailable):
            await forwarder.route_reply(_reply(request_id), SID, PRINCIPAL)
        network.hold = lambda message: False
        acks: list[dict[str, Any]] = []
        forwarder.worker.on("mcp.reply.ack", acks.append)  # type: ignore[arg-type]
        network.release()
        for _ in range(10):
            await asyncio.sleep(0)
        # Told 503: the ask did not take it (it failed), and the holder says so again.
        assert isinstance(asked.exception(), MCPError)
        assert [a.get("taken") for a in acks] == [False]

    asyncio.run(run())


def test_a_reply_the_layer_took_before_it_froze_is_reported_taken_within_the_layer_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 29, fault 4: Redis froze right after it took a reply; the holder's ask received it,
    but the forwarder waited out REPLY_ACK_SECONDS, then its question to the holder timed out
    (CHANNEL_LAYER_TIMEOUT), and it answered 503 after 3.76 s: a client that may answer again."""
    from mcp_django.conf import mcp_settings

    monkeypatch.setattr(relay_module, "REPLY_ACK_SECONDS", 3)  # the real waits
    monkeypatch.setattr(relay_module, "REPLY_VERDICT_SECONDS", 2)
    bound = mcp_settings.CHANNEL_LAYER_TIMEOUT

    async def run() -> None:
        network, holder, forwarder = _pair()
        frozen: list[bool] = []
        deliver = network.send

        async def send(channel: str, message: dict[str, Any]) -> None:
            if frozen:  # what layer_call does on a hung Redis
                await asyncio.sleep(bound)
                raise Unavailable("the channel layer")
            await deliver(channel, message)
            if message["type"] == "mcp.reply":
                frozen.append(True)

        network.send = send  # type: ignore[method-assign]
        request_id, asked = holder.replies(SID, PRINCIPAL).open()
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await forwarder.route_reply(_reply(request_id), SID, PRINCIPAL) is True
        took = loop.time() - started
        assert asked.done() and asked.result() == _reply(request_id)
        assert took < bound + 0.1, f"answered after {took:.2f} s"

    asyncio.run(run())


def test_a_reply_the_layer_refused_is_reported_failed_at_once() -> None:
    async def run() -> None:
        network, holder, forwarder = _pair()

        async def refused(channel: str, message: dict[str, Any]) -> None:
            raise Unavailable("the channel layer")  # the layer's breaker is open

        network.send = refused  # type: ignore[method-assign]
        request_id, asked = holder.replies(SID, PRINCIPAL).open()
        with pytest.raises(Unavailable):
            await forwarder.route_reply(_reply(request_id), SID, PRINCIPAL)
        assert not asked.done()  # the client may answer again, and that answer will count

    asyncio.run(run())


def test_a_reply_to_a_full_channel_is_reported_failed_at_once(caplog: pytest.LogCaptureFixture) -> None:
    """The holder's channel is full (an error that says nothing of the layer, raised as it is):
    neither the reply nor the question can go, and the client is told 503 without waiting."""
    from channels.exceptions import ChannelFull

    async def run() -> None:
        network, holder, forwarder = _pair()

        async def full(channel: str, message: dict[str, Any]) -> None:
            raise ChannelFull()

        network.send = full  # type: ignore[method-assign]
        request_id, asked = holder.replies(SID, PRINCIPAL).open()
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(Unavailable):
            await forwarder.route_reply(_reply(request_id), SID, PRINCIPAL)
        assert loop.time() - started < 0.1
        assert not asked.done()

    asyncio.run(run())
    assert "could not forward a reply to mcp-django.a!0 (ChannelFull)" in caplog.text


def test_a_repeated_answer_is_taken_once_and_answered_202() -> None:
    """A client told 503 may answer again, to any instance: the ask takes one reply, and the
    repeated one is acknowledged (202) and ignored, during the call and after it."""

    async def run() -> None:
        _network, holder, forwarder = _pair()
        request_id, asked = holder.replies(SID, PRINCIPAL).open()
        first = _reply(request_id)
        again = {**first, "result": {"action": "accept", "content": {"name": "x"}}}
        assert await forwarder.route_reply(first, SID, PRINCIPAL) is True
        assert await forwarder.route_reply(again, SID, PRINCIPAL) is True
        assert await holder.route_reply(again, SID, PRINCIPAL) is True
        assert asked.result() == first
        holder.held.close(request_id)  # the call is over
        assert await forwarder.route_reply(again, SID, PRINCIPAL) is True
        assert asked.result() == first

    asyncio.run(run())


def test_a_holder_forgets_old_outcomes(monkeypatch: pytest.MonkeyPatch) -> None:
    """What became of each forwarded reply is kept _OUTCOME_SECONDS, not for the process's life."""
    monkeypatch.setattr(relay_module, "_OUTCOME_SECONDS", 0)

    async def run() -> None:
        _network, holder, forwarder = _pair()
        for _ in range(3):
            request_id, asked = holder.replies(SID, PRINCIPAL).open()
            assert await forwarder.route_reply(_reply(request_id), SID, PRINCIPAL) is True
            assert asked.result() == _reply(request_id)
        assert len(holder._outcomes) == 1  # the latest only: the older ones expired

    asyncio.run(run())


def test_without_a_channel_layer_replies_and_updates_stay_in_the_process() -> None:
    """A project that configures no CHANNEL_LAYERS (one process): the worker's channel is a local
    name, replies are delivered and resource updates heard all the same (docs/legacy.md)."""
    from django.test import override_settings

    from mcp_django.resource_updates import announce, listeners
    from mcp_django.transports.relay import relay
    from mcp_django.worker_channel import is_worker_channel

    async def run() -> None:
        hub = await relay()
        try:
            assert hub.worker.layer is None and not hub.worker.shared
            assert hub.worker.channel.startswith("local.") and is_worker_channel(hub.worker.channel)
            request_id, asked = hub.replies(SID, PRINCIPAL).open()
            assert await hub.route_reply(_reply(request_id), SID, PRINCIPAL) is True
            assert asked.result() == _reply(request_id)
            heard: list[str] = []
            (await listeners()).watch(heard.append)
            await announce("test://r")
            await asyncio.sleep(0)
            assert heard == ["test://r"]
        finally:
            await hub.worker.stop()

    with override_settings(CHANNEL_LAYERS={}):
        asyncio.run(run())
