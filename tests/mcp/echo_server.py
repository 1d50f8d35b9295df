"""The ceiling for tests/benches/mcp.rs: the least an MCP stdio server can do per tool call
(read a JSON-RPC line, write a fixed answer), so the Python client's own cost is what remains."""

import json
import sys

TOOL = {"name": "echo", "description": "Echoes its arguments.", "inputSchema": {"type": "object"}}

for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # notifications
    method = request["method"]
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "echo", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        text = json.dumps(request["params"].get("arguments") or {})
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\n")
    sys.stdout.flush()
