"""The wire protocol: JSON-RPC messages, revisions and method dispatch."""
