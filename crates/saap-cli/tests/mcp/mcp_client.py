"""A real MCP client (PyPI's `mcp`, the official Python SDK) driving `saap mcp` over stdio.

Usage: python mcp_client.py PLAN.json

PLAN.json: {"command": "/path/to/saap", "args": ["mcp", ...], "cwd": "...",
            "calls": [{"name": "check", "arguments": {...}}, ...],
            "timeout": 60}

Starts the server as a child over stdio, initializes, lists the tools, makes each call in
order and prints one JSON document on stdout:
  {"server": {...initialize result...},
   "tools": [tool as on the wire (name, description, inputSchema, annotations)],
   "calls": [{"name", "arguments", "is_error", "text"} or {"name", "arguments",
              "protocol_error": "message"}]}
It does not judge anything: the Rust test (tests/mcp_client.rs) asserts on what it prints.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
try:  # mcp >= 2
    from mcp.shared.exceptions import MCPError as ProtocolError
except ImportError:  # mcp 1.x
    from mcp.shared.exceptions import McpError as ProtocolError


def wire(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main(plan):
    params = StdioServerParameters(
        command=plan["command"], args=plan["args"], cwd=plan.get("cwd"), env=plan.get("env")
    )
    timeout = plan.get("timeout", 60)
    out = {"calls": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await asyncio.wait_for(session.initialize(), timeout)
            out["server"] = wire(init)
            tools = await asyncio.wait_for(session.list_tools(), timeout)
            out["tools"] = [wire(t) for t in tools.tools]
            for call in plan["calls"]:
                entry = {"name": call["name"], "arguments": call.get("arguments")}
                try:
                    result = await asyncio.wait_for(
                        session.call_tool(call["name"], call.get("arguments")), timeout
                    )
                    d = wire(result)
                    entry["is_error"] = bool(d.get("isError", False))
                    entry["text"] = "".join(
                        c.get("text", "") for c in d.get("content", []) if c.get("type") == "text"
                    )
                except ProtocolError as e:
                    entry["protocol_error"] = str(e)
                out["calls"].append(entry)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        asyncio.run(main(json.load(f)))
