"""Figures of `autogpt-shim mcp` for tests/benches/mcp.rs, through the official MCP Python SDK:
the tool-call round trip of `stat` and of `run_command` `true` against ours, beside the same
client calling the minimal stdio server in echo_server.py (the ceiling: what the client itself
costs), and our server's resident memory when idle. Prints one line a figure.

Environment as for driver.py (MCP_SHIM, MCP_HOME, MCP_ROOT), plus MCP_ROUNDS.
"""

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SHIM = os.environ["MCP_SHIM"]
HOME = Path(os.environ["MCP_HOME"])
ROOT = Path(os.environ["MCP_ROOT"])
ROUNDS = int(os.environ.get("MCP_ROUNDS", "300"))
ENV = {
    "PATH": os.environ["PATH"],
    "HOME": str(HOME),
    "XDG_CONFIG_HOME": str(HOME / ".config"),
    "XDG_STATE_HOME": str(HOME / ".local/state"),
    # The bench runs more commands a minute than the default rate limit allows.
    "AUTOGPT_SHIM_MAX_COMMANDS_PER_MINUTE": "1000000",
}


def children_rss_kib():
    """VmRSS of this process's children (the server the SDK spawned), in KiB."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("PPid", "").strip() == me:
            return int(fields["VmRSS"].split()[0])
    raise AssertionError("no child server found")


async def rounds(session, name, arguments):
    for _ in range(20):  # warm-up
        await session.call_tool(name, arguments)
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        result = await session.call_tool(name, arguments)
        times.append(time.perf_counter() - started)
        assert not result.is_error, result.content
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95)]


async def measure(params, calls):
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        await asyncio.sleep(1)
        rss = children_rss_kib()
        figures = {name: await rounds(session, tool, arguments) for name, (tool, arguments) in calls.items()}
        return rss, figures


async def main():
    (ROOT / "f.txt").write_text("x")
    ours = StdioServerParameters(command=SHIM, args=["--allowed-root", str(ROOT), "mcp", "--enable-shell"], env=ENV)
    echo = StdioServerParameters(command=sys.executable, args=[str(Path(__file__).with_name("echo_server.py"))], env=ENV)
    rss, figures = await measure(ours, {"stat": ("stat", {"path": "f.txt"}), "true": ("run_command", {"argv": ["true"]})})
    echo_rss, ceiling = await measure(echo, {"echo": ("echo", {"path": "f.txt"})})
    (echo_median, echo_p95) = ceiling["echo"]
    print(f"rounds per figure: {ROUNDS}")
    print(f"echo server (ceiling): median {echo_median * 1e3:.3f} ms, p95 {echo_p95 * 1e3:.3f} ms")
    for name, (median, p95) in figures.items():
        print(f"{name}: median {median * 1e3:.3f} ms, p95 {p95 * 1e3:.3f} ms, {median / echo_median:.2f}x the echo median")
    print(f"idle RSS: autogpt-shim mcp {rss} KiB, echo server (python3) {echo_rss} KiB, ratio {rss / echo_rss:.2f}")


asyncio.run(main())
