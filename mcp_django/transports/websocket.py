"""Websockets: not served yet (legacy transport work lands here)."""

from __future__ import annotations

from typing import Any


def websocket_application(registry: Any) -> Any:
    async def refuse(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.close", "code": 1003})

    return refuse
