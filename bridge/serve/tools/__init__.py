"""Server tools, the ones the bridge runs itself: Python functions, MCP servers' tools and
their apps' UIs, and the signed approvals a person gives before a call runs."""
