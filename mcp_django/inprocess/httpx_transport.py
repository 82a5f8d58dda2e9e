"""An ``httpx`` transport into the ASGI application, in process (needs ``httpx``, a test dependency)."""

from __future__ import annotations

from typing import Any

import httpx

from . import serving


class HttpxTransport(httpx.BaseTransport):
    """For a sync ``httpx.Client``: raw HTTP with the test client's threading (the response body
    is read whole, so a stream must end on its own)."""

    def __init__(self, app: Any = None) -> None:
        self.app = app

    def handle_request(self, request: Any) -> Any:
        if self.app is None:
            self.app = serving.default_app()
        # httpx joins a repeated header's values with ", ", as one header line would carry them.
        headers = {name: value for name, value in request.headers.items() if name != "host"}
        path = request.url.raw_path.decode("ascii")
        host = request.headers.get("host") or request.url.netloc.decode("ascii") or "testserver"
        body = request.read()

        async def send() -> tuple[int, dict[str, str], bytes]:
            async with serving.exchange(self.app, request.method, path, headers, body, host) as response:
                return response.status, response.headers, await response.body()

        status, out_headers, content = serving.run(send)
        return httpx.Response(status, headers=out_headers, content=content, request=request)
