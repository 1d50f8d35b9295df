"""Drives `click_element` and `type_into_element` of the real `autogpt-shim mcp` with the
official MCP Python SDK, for tests/tests/suite/mcp_elements.rs.

Usage: elements.py, with driver.py's environment (MCP_SHIM, MCP_HOME, MCP_ROOT, MCP_OUTSIDE),
the private desktop's variables, and the witness window started for the element tools
(MCP_WITNESS_TITLE, its process MCP_WITNESS_PID): its "Press me" button becomes "Pressed" once
clicked, and its entry is named "Your name". MCP_TYPED is the text to type into the entry.

The server runs with --max-image-edge 640 on the 1280x720 desktop, so its screenshots are
scaled by 2 while element boxes, clicks and the pointer stay in screen pixels.
Each passed check prints `ok NAME`; the Rust side checks what the witness received.
"""

import asyncio
import os
import re
import signal
import subprocess
import time

from driver import (
    COMPUTER_TOOLS,
    FILE_TOOLS,
    check_listing,
    desktop_env,
    failed,
    ok,
    params,
    payload,
    protocol_error,
    screen_size,
    wait_gone,
)
from mcp import ClientSession
from mcp.client.stdio import stdio_client

ID = re.compile(r"^e[1-9][0-9]*$")
STALE = "take a new accessibility snapshot and use its ids"


def centre(box):
    """The point click_element aims at: the centre pixel of [x1, y1, x2, y2]."""
    return [box[0] + (box[2] - box[0]) // 2, box[1] + (box[3] - box[1]) // 2]


def by_label(snapshot, label):
    found = [e for e in snapshot["elements"] if e["label"] == label]
    assert len(found) == 1, (label, snapshot)
    return found[0]


async def elements():
    width, height = screen_size()
    title = os.environ["MCP_WITNESS_TITLE"]
    witness_pid = int(os.environ["MCP_WITNESS_PID"])
    typed = os.environ["MCP_TYPED"]
    env = desktop_env()
    # Room for the screenshot (driver.py's default limit is 4 KiB).
    limits = {"AUTOGPT_SHIM_MAX_FILE_SIZE_BYTES": str(10 * 1024 * 1024)}
    server = params("--enable-computer-use", "--max-image-edge", "640", extra_env={**env, **limits})
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await check_listing(session, FILE_TOOLS + COMPUTER_TOOLS)
        for name in ["click_element", "type_into_element"]:
            hints = tools[name].annotations
            assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (False, True, False, True), (name, hints)
            assert tools[name].input_schema["required"][0] == "element_id", tools[name].input_schema
            assert "action" not in tools[name].input_schema["properties"], tools[name].input_schema
        ok("listing")
        call = session.call_tool

        windows = payload(await call("list_windows", {}))
        listed = [w for w in windows["windows"] if w["title"] == title]
        assert len(listed) == 1, windows
        window_id, bounds = listed[0]["window_id"], listed[0]["bounds"]
        snapshot = payload(await call("accessibility_snapshot", {"window_id": window_id, "deadline_ms": 8000}))
        ids = [e["id"] for e in snapshot["elements"]]
        assert all(ID.match(i) for i in ids) and len(set(ids)) == len(ids), snapshot
        button = by_label(snapshot, "Press me")
        entry = by_label(snapshot, "Your name")
        # GTK 3 gives an entry the AT-SPI role `text`, which is the UI Automation `text` too.
        assert button["role"] == "button" and entry["role"] == "text", snapshot
        for element in [button, entry]:
            box = element["box"]
            assert bounds[0] <= box[0] < box[2] <= bounds[2] and bounds[1] <= box[1] < box[3] <= bounds[3], (box, bounds)
        # The same elements keep their ids in a later snapshot.
        again = payload(await call("accessibility_snapshot", {"window_id": window_id, "deadline_ms": 8000}))
        assert again == snapshot, (again, snapshot)
        ok("snapshot_ids")

        # One space: the box's centre is where click_element clicks, where input_action's
        # coordinates point, and what the pointer reports (and the X server too).
        assert payload(await call("click_element", {"element_id": button["id"]})) == {"ok": True}
        assert payload(await call("cursor_position", {})) == {"x": centre(button["box"])[0], "y": centre(button["box"])[1], "monitor": 0}
        located = subprocess.run(["xdotool", "getmouselocation"], env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout
        assert located.startswith(f"x:{centre(button['box'])[0]} y:{centre(button['box'])[1]} "), located
        ok("click_element")

        # The click relabelled the button: its old id is stale, a new snapshot names it anew.
        deadline = time.monotonic() + 20
        while True:
            later = payload(await call("accessibility_snapshot", {"window_id": window_id, "deadline_ms": 8000}))
            pressed = [e for e in later["elements"] if e["label"] == "Pressed"]
            if pressed or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert len(pressed) == 1, later
        assert pressed[0]["id"] != button["id"] and by_label(later, "Your name")["id"] == entry["id"], later
        refused = failed(
            await call("click_element", {"element_id": button["id"]}),
            "WINDOW_STALE",
            f"the element id {button['id']} is stale: the element changed or is gone; {STALE}",
        )
        assert refused["details"] == {"element_id": button["id"], "hint": "take a new accessibility snapshot"}, refused
        ok("changed_element_refused")

        assert payload(await call("type_into_element", {"element_id": entry["id"], "text": typed})) == {"ok": True}
        at = payload(await call("cursor_position", {}))
        assert [at["x"], at["y"]] == centre(entry["box"]), (at, entry)
        ok("type_into_element")

        for unknown in ["e999999", "e0", "button", ""]:
            failed(
                await call("click_element", {"element_id": unknown}),
                "WINDOW_STALE",
                f"the element id {unknown} is unknown (no snapshot gave it, or it is too old); {STALE}",
            )
        failed(await call("type_into_element", {"element_id": "e999999", "text": "never typed"}), "WINDOW_STALE")
        for tool, arguments, field in [
            ("click_element", {}, "element_id"),
            ("click_element", {"element_id": 3}, "element_id"),
            ("click_element", {"element_id": entry["id"], "action": "type"}, "action"),
            ("type_into_element", {"element_id": entry["id"]}, "text"),
            ("type_into_element", {"element_id": entry["id"], "text": 5}, "text"),
        ]:
            message = await protocol_error(session, tool, arguments)
            assert f"`{field}`" in message, (tool, arguments, message)
        ok("unknown_ids_refused")

        # A scaled screenshot says its factor, and the element boxes stay in screen pixels.
        shot = await call("screenshot", {"format": "png"})
        meta = payload(shot)
        assert (meta["width"], meta["height"]) == (width // 2, height // 2), meta
        assert meta["screen_pixels_per_image_pixel"] == 2.0 and meta["meta"]["origin"] == [0, 0], meta
        ok("scaled_screenshot")

        # The window closes: its elements' ids are stale, and nothing is clicked.
        os.kill(witness_pid, signal.SIGTERM)
        assert await wait_gone(witness_pid, 10), "the witness outlived its SIGTERM"
        deadline = time.monotonic() + 20
        while True:
            result = await call("click_element", {"element_id": entry["id"]})
            text = result.content[0].text
            if "its window is gone" in text or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        failed(result, "WINDOW_STALE", f"the element id {entry['id']} is stale: its window is gone; {STALE}")
        failed(await call("type_into_element", {"element_id": entry["id"], "text": "never typed"}), "WINDOW_STALE")
        ok("closed_window_refused")


if __name__ == "__main__":
    asyncio.run(elements())
