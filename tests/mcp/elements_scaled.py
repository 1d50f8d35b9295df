"""Drives `accessibility_snapshot`, `click_element` and `type_into_element` of the real
`autogpt-shim mcp` with the official MCP Python SDK against the witness window scaled by GTK
itself (GDK_SCALE=2), for tests/tests/suite/mcp_elements.rs.

Usage: elements_scaled.py, with driver.py's environment, the private desktop's variables, the
witness started for the element tools (MCP_WITNESS_TITLE), the button's and the entry's root
geometry in screen pixels as the witness reports them (MCP_WITNESS_BUTTON, MCP_WITNESS_ENTRY:
"x y width height"), and MCP_TYPED, the text to type into the entry.

GTK reports its accessibility boxes in its logical pixels, half the screen's; the server's boxes
must be the screen's, where the window list, the pointer and the clicks are.
Each passed check prints `ok NAME`; the Rust side checks what the witness received.
"""

import asyncio
import os

from driver import desktop_env, ok, params, payload
from elements import by_label, centre
from mcp import ClientSession
from mcp.client.stdio import stdio_client


def corners(geometry):
    x, y, width, height = (int(v) for v in geometry.split())
    return [x, y, x + width, y + height]


def near(box, real):
    """GTK's logical coordinates are the screen's halved and rounded down: a pixel of slack."""
    return all(abs(a - b) <= 1 for a, b in zip(box, real))


async def elements_scaled():
    title = os.environ["MCP_WITNESS_TITLE"]
    real = {"Press me": corners(os.environ["MCP_WITNESS_BUTTON"]), "Your name": corners(os.environ["MCP_WITNESS_ENTRY"])}
    typed = os.environ["MCP_TYPED"]
    server = params("--enable-computer-use", extra_env=desktop_env())
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        call = session.call_tool
        windows = payload(await call("list_windows", {}))
        listed = [w for w in windows["windows"] if w["title"] == title]
        assert len(listed) == 1, windows
        window_id, bounds = listed[0]["window_id"], listed[0]["bounds"]
        # The window is listed at its size on screen: 640x480 of GTK's pixels, twice that here.
        assert (bounds[2] - bounds[0], bounds[3] - bounds[1]) == (1280, 960), bounds
        snapshot = payload(await call("accessibility_snapshot", {"window_id": window_id, "deadline_ms": 8000}))
        button, entry = by_label(snapshot, "Press me"), by_label(snapshot, "Your name")
        for element in [button, entry]:
            assert near(element["box"], real[element["label"]]), (element, real)
        ok("boxes_in_screen_pixels")

        assert payload(await call("click_element", {"element_id": button["id"]})) == {"ok": True}
        at = payload(await call("cursor_position", {}))
        assert [at["x"], at["y"]] == centre(button["box"]), (at, button)
        ok("click_element")

        assert payload(await call("type_into_element", {"element_id": entry["id"], "text": typed})) == {"ok": True}
        at = payload(await call("cursor_position", {}))
        assert [at["x"], at["y"]] == centre(entry["box"]), (at, entry)
        ok("type_into_element")


if __name__ == "__main__":
    asyncio.run(elements_scaled())
