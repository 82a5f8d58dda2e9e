"""Transports: how MCP messages reach the dispatcher (ASGI HTTP, websockets, a WSGI view, stdio)."""
