import pytest

from tests.conftest import sdk_client


@pytest.mark.anyio
async def test_sdk_lists_and_calls(live_url: str) -> None:
    async with sdk_client(live_url) as client:
        tools = await client.list_tools()
        assert tools.tools[0].name == "test_simple_text"
        result = await client.call_tool("echo", {"text": "hi"})
        assert result.content[0].text == "hi"
