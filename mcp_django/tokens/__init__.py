"""The app's own credentials for MCP clients: named, hashed, scoped, expiring, revocable tokens."""
