"""memoir's MCP server: tools, resources and prompts over the memoir facade, on stdio, SSE and
streamable HTTP.

Entry points: :func:`server.mcp_app.app.build_server` (a configured ``MCPServer``),
:class:`server.mcp_app.runtime.MemoirRuntime` (the store it serves) and
:func:`server.mcp_app.transports.serve`. Nothing is imported here so that importing a submodule
stays cheap (start-up time matters: clients spawn the server for every session).
"""
