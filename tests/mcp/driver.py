"""Drives the real `autogpt-shim mcp` with the official MCP Python SDK (the client a desktop app
or agent uses), for tests/tests/suite/mcp.rs.

Usage: driver.py SCENARIO, with the environment naming the binary (MCP_SHIM), its home
(MCP_HOME), the allowed root (MCP_ROOT) and a folder outside it holding `secret.txt`
(MCP_OUTSIDE). Scenarios: `files` (default switches), `shell` (--enable-shell), `stdin`
(stdin closes under a running command, over raw JSON-RPC), and with --enable-computer-use on
the private desktop whose variables it is given: `computer` (screenshots, input at
MCP_CLICK_X/Y on the witness window, windows, the clipboard) and `desktop` (displays, the
pointer, apps, and the accessibility tree of the witness window MCP_WITNESS_TITLE, whose
process is MCP_WITNESS_PID).

Every check asserts exact codes and messages; the first failure ends the run with a traceback
and exit status 1. Each passed check prints `ok NAME`, which the Rust test counts.
"""

import asyncio
import base64
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import mcp_types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

SHIM = os.environ["MCP_SHIM"]
HOME = Path(os.environ["MCP_HOME"])
ROOT = Path(os.environ["MCP_ROOT"])
OUTSIDE = Path(os.environ["MCP_OUTSIDE"])

FILE_TOOLS = ["read_file", "write_file", "stat", "list_directory", "delete", "move"]
COMPUTER_TOOLS = [
    "screenshot",
    "input_action",
    "cursor_position",
    "display_info",
    "list_windows",
    "focus_window",
    "list_apps",
    "launch_app",
    "accessibility_snapshot",
    "click_element",
    "type_into_element",
]
OUTSIDE_ROOT = "PATH_OUTSIDE_ALLOWED_ROOT: path is outside the allowed root"
MAX_FILE_SIZE = 4096


def ok(name):
    print(f"ok {name}", flush=True)


def server_env(extra=None):
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(HOME),
        "XDG_CONFIG_HOME": str(HOME / ".config"),
        "XDG_STATE_HOME": str(HOME / ".local/state"),
        # The configuration reaches `mcp` as it reaches `start`: this one from the environment.
        "AUTOGPT_SHIM_MAX_FILE_SIZE_BYTES": str(MAX_FILE_SIZE),
    }
    env.update(extra or {})
    return env


def params(*switches, extra_env=None):
    return StdioServerParameters(
        command=SHIM,
        args=["--allowed-root", str(ROOT), "mcp", *switches],
        env=server_env(extra_env),
    )


def payload(result):
    """The JSON a successful call answers (text and structured content agree)."""
    assert not result.is_error, f"unexpected error: {result.content}"
    text = json.loads(result.content[-1].text)
    assert result.structured_content == text, (result.structured_content, text)
    return text


def failed(result, code, message=None):
    """Checks the call failed as a tool result with the connector's code and message."""
    assert result.is_error is True, f"expected {code}, got {result.content}"
    text = result.content[0].text
    assert text.startswith(f"{code}: "), text
    assert result.structured_content["code"] == code, result.structured_content
    if message is not None:
        assert text == f"{code}: {message}", text
    return result.structured_content


async def protocol_error(session, name, arguments):
    try:
        await session.call_tool(name, arguments)
    except MCPError as err:
        assert err.code == -32602, (err.code, err.message)
        return err.message
    raise AssertionError(f"{name}({arguments}) answered instead of a protocol error")


async def check_listing(session, expected):
    init = session.initialize_result
    assert init.server_info.name == "autogpt-shim", init.server_info
    listing = await session.list_tools()
    names = [tool.name for tool in listing.tools]
    assert names == expected, names
    for tool in listing.tools:
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["type"] == "object", tool.name
        assert tool.description and len(tool.description) > 40, tool.name
        check_fillable(tool)
    return {tool.name: tool for tool in listing.tools}


def check_fillable(tool):
    """A schema every client can fill in (issue 36): one JSON type per parameter, nothing
    required that has a default, defaults stated, a title and all four annotations, and an
    output schema the SDK checks every successful result against."""
    schema = tool.input_schema
    required = set(schema.get("required", []))
    for field, prop in schema.get("properties", {}).items():
        assert isinstance(prop.get("type"), str), (tool.name, field, prop)
        if "default" in prop:
            assert field not in required, (tool.name, field)
    assert '"null"' not in json.dumps(schema), (tool.name, schema)
    assert tool.title, tool.name
    hints = tool.annotations
    assert hints is not None and hints.title == tool.title, tool.name
    for hint in [hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint]:
        assert isinstance(hint, bool), (tool.name, hints)
    assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
    jsonschema.Draft202012Validator.check_schema(tool.output_schema)


def gone(pid):
    """Whether the process is dead (a zombie awaiting its reaper counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        # Reaped before the open, or between the open and the read (ESRCH).
        return True
    return state == "Z"


# The waits yield to the event loop: the SDK writes to the server (a cancellation too) from a
# task of that loop, so a blocking sleep would hold its messages back.
async def wait_gone(pid, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        await asyncio.sleep(0.05)
    return False


async def wait_file(path, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


async def files():
    async with stdio_client(params()) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await check_listing(session, FILE_TOOLS)
        assert str(MAX_FILE_SIZE) in tools["read_file"].description
        ok("initialize_and_list_files_only")

        call = session.call_tool
        assert payload(await call("write_file", {"path": "a/b/note.txt", "content": "hello world", "create_parents": True})) == {"ok": True}
        read = payload(await call("read_file", {"path": "a/b/note.txt"}))
        assert read == {"content": "hello world", "encoding": "utf-8", "size_bytes": 11, "truncated": False}, read
        ranged = payload(await call("read_file", {"path": "a/b/note.txt", "offset": 6, "length": 3}))
        assert ranged["content"] == "wor", ranged
        raw = bytes(range(256))
        assert payload(await call("write_file", {"path": "bin.dat", "content": base64.b64encode(raw).decode(), "encoding": "base64"}))["ok"]
        binary = payload(await call("read_file", {"path": "bin.dat", "encoding": "base64"}))
        assert base64.b64decode(binary["content"]) == raw and binary["encoding"] == "base64", binary
        ok("read_and_write")

        stat = payload(await call("stat", {"path": "a/b/note.txt"}))
        assert stat["exists"] and stat["is_file"] and stat["size_bytes"] == 11, stat
        missing = payload(await call("stat", {"path": "nope.txt"}))
        assert missing["exists"] is False and missing["size_bytes"] is None, missing
        for name in ["x1.txt", "x2.txt", "y.md", ".hidden"]:
            payload(await call("write_file", {"path": f"list/{name}", "content": "x", "create_parents": True}))
        listed = payload(await call("list_directory", {"path": "list", "glob": "*.txt"}))
        assert sorted(e["name"] for e in listed["entries"]) == ["x1.txt", "x2.txt"], listed
        hidden = payload(await call("list_directory", {"path": "list", "include_hidden": True}))
        assert ".hidden" in [e["name"] for e in hidden["entries"]], hidden
        cut = payload(await call("list_directory", {"path": "list", "max_entries": 2}))
        assert len(cut["entries"]) == 2 and cut["truncated"] is True, cut
        deep = payload(await call("list_directory", {"path": ".", "recursive": True}))
        assert any(e["name"] == "note.txt" for e in deep["entries"]), deep
        ok("stat_and_list")

        assert payload(await call("move", {"src": "list/y.md", "dst": "list/z.md"}))["ok"]
        failed(await call("move", {"src": "list/x1.txt", "dst": "list/x2.txt"}), "PATH_EXISTS")
        assert payload(await call("move", {"src": "list/x1.txt", "dst": "list/x2.txt", "overwrite": True}))["ok"]
        failed(await call("delete", {"path": "list"}), "PATH_NOT_EMPTY")
        assert payload(await call("delete", {"path": "list", "recursive": True}))["ok"]
        failed(await call("delete", {"path": "list"}), "PATH_NOT_FOUND")
        assert payload(await call("delete", {"path": "list", "missing_ok": True}))["ok"]
        ok("move_and_delete")

        # Jail escapes: `..`, an absolute path outside, a symlink inside pointing out.
        (ROOT / "link").symlink_to(OUTSIDE)
        for path in ["../outside/secret.txt", str(OUTSIDE / "secret.txt"), "link/secret.txt"]:
            failed(await call("read_file", {"path": path}), "PATH_OUTSIDE_ALLOWED_ROOT", "path is outside the allowed root")
            failed(await call("write_file", {"path": path, "content": "pwned"}), "PATH_OUTSIDE_ALLOWED_ROOT")
            failed(await call("stat", {"path": path}), "PATH_OUTSIDE_ALLOWED_ROOT")
            failed(await call("delete", {"path": path}), "PATH_OUTSIDE_ALLOWED_ROOT")
        failed(await call("move", {"src": "a/b/note.txt", "dst": "link/stolen.txt"}), "PATH_OUTSIDE_ALLOWED_ROOT")
        failed(await call("list_directory", {"path": "link"}), "PATH_OUTSIDE_ALLOWED_ROOT")
        assert (OUTSIDE / "secret.txt").read_text() == "secret", "the outside file changed"
        assert not (OUTSIDE / "stolen.txt").exists()
        ok("jail_escapes_refused")

        big = "x" * (MAX_FILE_SIZE + 1)
        failed(await call("write_file", {"path": "big.txt", "content": big}), "FILE_TOO_LARGE")
        (ROOT / "big.txt").write_text(big)
        # A read is a page within the configured limit, never FILE_TOO_LARGE: it says where to go on.
        page = payload(await call("read_file", {"path": "big.txt", "encoding": "base64"}))
        assert len(base64.b64decode(page["content"])) == MAX_FILE_SIZE and page["next_offset"] == MAX_FILE_SIZE, page
        rest = payload(await call("read_file", {"path": "big.txt", "encoding": "base64", "offset": page["next_offset"]}))
        assert base64.b64decode(rest["content"]) == b"x" and "next_offset" not in rest, rest
        ok("file_too_large")

        # The wire payload's own rules: the connector's code and message.
        invalid = failed(await call("read_file", {"path": "a", "length": 0}), "INTERNAL_ERROR", "invalid FILE_READ payload")
        assert invalid["details"] == {"message_type": "FILE_READ", "field": "length"}, invalid
        # Arguments outside the schema, and tools not offered: protocol errors.
        read = tools["read_file"]
        assert read.input_schema["required"] == ["path"], read.input_schema
        assert read.input_schema["properties"]["encoding"]["default"] == "utf-8", read.input_schema
        assert read.annotations.read_only_hint is True and tools["delete"].annotations.destructive_hint is True
        message = await protocol_error(session, "read_file", {})
        assert message == "`path` is required; see read_file's inputSchema", message
        message = await protocol_error(session, "read_file", {"path": "a", "offset": -1})
        assert message == "`offset` must be a non-negative integer", message
        message = await protocol_error(session, "write_file", {"path": "a", "content": "x", "create_parents": "yes"})
        assert message == "`create_parents` must be true or false", message
        message = await protocol_error(session, "write_file", {"path": "a", "content": 5})
        assert "`content`" in message, message
        message = await protocol_error(session, "read_file", {"path": "a", "bogus": 1})
        assert message == "`bogus` is not a parameter of read_file, which takes encoding, length, offset, path", message
        message = await protocol_error(session, "run_command", {"argv": ["true"]})
        assert message.startswith('unknown tool "run_command"'), message
        ok("bad_input")


SHELL_WARNING = "shell is enabled: the MCP client can run any command with this user's permissions"


async def listing_with(config, *switches):
    """The tool names a server lists with this config file and these switches, and its stderr."""
    config_dir = HOME / ".config/autogpt-local-executor"
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(config)
    errlog_path = HOME / "powers.stderr"
    with open(errlog_path, "w") as errlog:
        async with stdio_client(params(*switches), errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = [tool.name for tool in (await session.list_tools()).tools]
            if "run_command" not in names:
                message = await protocol_error(session, "run_command", {"command": "echo hi; pwd"})
                assert message.startswith('unknown tool "run_command"'), message
    return names, errlog_path.read_text()


async def powers():
    # `install --enable-shell` writes the daemon's switch; `mcp` without its own offers no shell.
    names, stderr = await listing_with("enable_shell = true\nenable_computer_use = true\n")
    assert names == FILE_TOOLS, names
    assert SHELL_WARNING not in stderr, stderr
    assert "enable_shell is set for the daemon (`start`) and does not apply here" in stderr, stderr
    ok("daemon_shell_not_offered")

    names, stderr = await listing_with("", "--enable-shell")
    assert names == FILE_TOOLS + ["run_command"], names
    assert stderr.count(SHELL_WARNING) == 1, stderr
    names, stderr = await listing_with("[mcp]\nenable_shell = true\n")
    assert names == FILE_TOOLS + ["run_command"], names
    assert stderr.count(SHELL_WARNING) == 1, stderr
    ok("shell_offered_when_asked_and_said_once")

    names, _ = await listing_with("[mcp]\nenable_shell = true\nexclude_tools = [\"delete\"]\n", "--tools", "run_command,stat,delete")
    assert names == ["stat", "run_command"], names
    names, stderr = await listing_with("", "--exclude-tools", "delete,move,write_file")
    assert names == ["read_file", "stat", "list_directory"], names
    assert SHELL_WARNING not in stderr, stderr
    ok("tools_and_exclude_tools")


async def shell():
    async with stdio_client(params("--enable-shell")) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await check_listing(session, FILE_TOOLS + ["run_command"])
        call = session.call_tool
        echoed = payload(await call("run_command", {"argv": ["echo", "hi there"]}))
        assert echoed["stdout"] == "hi there\n" and echoed["exit_code"] == 0 and not echoed["timed_out"], echoed
        (ROOT / "sub").mkdir()
        line = payload(await call("run_command", {"command": "pwd; exit 3", "shell": "sh", "cwd": "sub"}))
        assert line["exit_code"] == 3 and line["stdout"] == f"{ROOT / 'sub'}\n", line
        failed(await call("run_command", {"argv": ["pwd"], "cwd": "../outside"}), "PATH_OUTSIDE_ALLOWED_ROOT")
        failed(await call("run_command", {"argv": ["no-such-program-anywhere"]}), "SHELL_NOT_AVAILABLE", "Executable not found: no-such-program-anywhere")
        failed(await call("run_command", {"argv": ["true"], "command": "true"}), "INTERNAL_ERROR", "invalid EXECUTE_COMMAND payload")
        loud = payload(await call("run_command", {"command": "head -c 20000 /dev/zero | tr '\\0' x", "shell": "sh"}))
        assert loud["output_truncated"] is True and len(loud["stdout"]) <= MAX_FILE_SIZE, len(loud["stdout"])
        ok("run_command")

        # A timed-out command: the whole tree is killed, grandchild included.
        pidfile = ROOT / "timeout.pid"
        started = time.monotonic()
        timed = payload(await call("run_command", {"command": f"sleep 30 & echo $! > {pidfile}; wait", "shell": "sh", "timeout_seconds": 1}))
        assert timed["timed_out"] is True and time.monotonic() - started < 10, timed
        grandchild = int(pidfile.read_text())
        assert await wait_gone(grandchild, 5), f"grandchild {grandchild} outlived the timeout"
        ok("timeout_kills_the_tree")

        # A cancelled call (the SDK sends notifications/cancelled when its read times out):
        # the command's tree dies with it, and the server goes on serving.
        pidfile = ROOT / "cancel.pid"
        try:
            await call("run_command", {"command": f"sleep 30 & echo $! > {pidfile}; wait", "shell": "sh", "timeout_seconds": 60}, read_timeout_seconds=2)
            raise AssertionError("the 30 s command answered within 2 s")
        except MCPError:
            pass
        grandchild = int(await wait_file(pidfile, 5))
        assert await wait_gone(grandchild, 5), f"grandchild {grandchild} outlived the cancellation"
        after = payload(await call("run_command", {"argv": ["echo", "still here"]}))
        assert after["stdout"] == "still here\n", after
        ok("cancel_kills_the_tree")


def stdin_close():
    """Raw JSON-RPC over pipes: stdin closes under a running command; the server exits by
    itself (not killed), the command's tree dies, and stdout held only protocol frames."""
    # stderr goes to a file: a pipe nobody reads would fill and stall the server.
    errors = HOME / "mcp-stderr.log"
    proc = subprocess.Popen(
        [SHIM, "--allowed-root", str(ROOT), "--log-level", "DEBUG", "mcp", "--enable-shell"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors.open("wb"),
        env=server_env(),
    )
    pidfile = ROOT / "stdin.pid"

    def send(message):
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    first = json.loads(proc.stdout.readline())
    assert first["id"] == 1 and "result" in first, first
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_command", "arguments": {"command": f"sleep 30 & echo $! > {pidfile}; wait", "shell": "sh", "timeout_seconds": 60}}})
    grandchild = int(asyncio.run(wait_file(pidfile, 10)))
    proc.stdin.close()
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the server did not exit when stdin closed")
    assert code == 0, (code, errors.read_text(errors="replace"))
    assert asyncio.run(wait_gone(grandchild, 5)), f"grandchild {grandchild} outlived the server"
    rest = proc.stdout.read().decode()
    for line in rest.splitlines():
        frame = json.loads(line)
        assert frame["jsonrpc"] == "2.0", line
    stderr = errors.read_text(errors="replace")
    # Even at DEBUG the log holds no request content.
    assert "sleep 30" not in stderr, stderr
    ok("stdin_close_stops_everything")


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def desktop_env():
    """The private desktop's variables the Rust side passed, for the server."""
    return {key: os.environ[key] for key in ["DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XDG_SESSION_TYPE"]}


def screen_size():
    return int(os.environ["MCP_SCREEN_WIDTH"]), int(os.environ["MCP_SCREEN_HEIGHT"])


async def computer():
    """The desktop tools on the private desktop the Rust side started (its variables passed
    through); the clicks, scrolls and typing land on the witness window, whose report the Rust
    side reads."""
    width, height = screen_size()
    click = [int(os.environ["MCP_CLICK_X"]), int(os.environ["MCP_CLICK_Y"])]
    desktop = desktop_env()
    # The configured size limit bounds screenshots too.
    async with stdio_client(params("--enable-computer-use", extra_env=desktop)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        failed(await session.call_tool("screenshot", {"format": "png"}), "FILE_TOO_LARGE")
    desktop["AUTOGPT_SHIM_MAX_FILE_SIZE_BYTES"] = str(10 * 1024 * 1024)
    async with stdio_client(params("--enable-computer-use", extra_env=desktop)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await check_listing(session, FILE_TOOLS + COMPUTER_TOOLS)
        call = session.call_tool
        shot = await call("screenshot", {"format": "png", "monitor": 0})
        assert not shot.is_error, shot.content
        image = shot.content[0]
        assert image.type == "image" and image.mime_type == "image/png", image
        assert png_size(base64.b64decode(image.data)) == (width, height)
        meta = json.loads(shot.content[1].text)
        assert (meta["width"], meta["height"]) == (width, height) and "image_base64" not in meta, meta
        assert "screen_pixels_per_image_pixel" not in meta, meta
        region = await call("screenshot", {"format": "png", "region": [10, 20, 110, 70]})
        assert png_size(base64.b64decode(region.content[0].data)) == (100, 50)
        jpeg = await call("screenshot", {"quality": 50})
        assert jpeg.content[0].mime_type == "image/jpeg" and base64.b64decode(jpeg.content[0].data)[:2] == b"\xff\xd8"
        # The payload's rules, with the connector's codes: the field in the details.
        for arguments, code, field in [
            ({"quality": 0}, "INTERNAL_ERROR", "quality"),
            ({"format": "gif"}, "FEATURE_NOT_SUPPORTED", "format"),
            ({"region": [0, 0, 10, 10], "window_id": "w-any"}, "FEATURE_NOT_SUPPORTED", "region"),
        ]:
            refused = failed(await call("screenshot", arguments), code, "invalid SCREENSHOT_REQUEST payload")
            assert refused["details"] == {"message_type": "SCREENSHOT_REQUEST", "field": field}, refused
        message = await protocol_error(session, "screenshot", {"region": [0, 0, 10]})
        assert "`region`" in message, message
        await protocol_error(session, "screenshot", {"quality": 300})
        # A capture longer than --max-image-edge is scaled down, aspect kept, and says how much.
        async with stdio_client(params("--enable-computer-use", "--max-image-edge", str(width // 2), extra_env=desktop)) as (read2, write2), ClientSession(read2, write2) as small:
            await small.initialize()
            scaled = await small.call_tool("screenshot", {"format": "png"})
            assert png_size(base64.b64decode(scaled.content[0].data)) == (width // 2, height // 2)
            meta = payload(scaled)
            assert (meta["width"], meta["logical_size"]) == (width // 2, [width, height]), meta
            assert meta["screen_pixels_per_image_pixel"] == 2.0 and "times 2, plus origin" in meta["note"], meta
            region = payload(await small.call_tool("screenshot", {"format": "png", "region": [10, 20, 110, 70]}))
            assert region["width"] == 100 and "screen_pixels_per_image_pixel" not in region, region
        ok("screenshot")

        failed(await call("input_action", {"action": "left_click", "coordinate": [width + 50, 10]}), "INPUT_OUT_OF_BOUNDS")
        assert payload(await call("input_action", {"action": "left_click", "coordinate": click})) == {"ok": True}
        # Far enough from the click that GTK does not count them as one double click.
        second = [click[0] + 40, click[1] + 30]
        assert payload(await call("input_action", {"action": "double_click", "coordinate": second})) == {"ok": True}
        assert payload(await call("input_action", {"action": "scroll", "coordinate": second, "scroll_direction": "down", "scroll_amount": 2})) == {"ok": True}
        # An action word the wire does not define: refused by the payload's rules, as the
        # connector refuses it (the word is in the schema's enum, the type is a string).
        unknown = failed(await call("input_action", {"action": "fly", "coordinate": click}), "FEATURE_NOT_SUPPORTED", "invalid INPUT_ACTION payload")
        assert unknown["details"] == {"message_type": "INPUT_ACTION", "field": "action"}, unknown
        failed(await call("input_action", {"action": "key", "key": "ctrl+hyperspace"}), "FEATURE_NOT_SUPPORTED", "input.key is not supported here: the key chord names an unknown key")
        message = await protocol_error(session, "input_action", {"action": "left_click", "coordinate": "middle"})
        assert "`coordinate`" in message and "middle" not in message, message
        await protocol_error(session, "input_action", {"action": "left_click", "coordinate": click, "speed": 2})
        ok("input_action")

        windows = payload(await call("list_windows", {}))
        witness = [w for w in windows["windows"] if w["title"] == "Witness MCP"]
        assert len(witness) == 1, windows
        assert payload(await call("focus_window", {"window_id": witness[0]["window_id"]})) == {"ok": True}
        failed(await call("focus_window", {"window_id": "w-stale"}), "WINDOW_STALE")
        message = await protocol_error(session, "list_windows", {"include_minimized": "no"})
        assert "`include_minimized`" in message, message
        await protocol_error(session, "focus_window", {})
        # Not offered without --enable-clipboard.
        await protocol_error(session, "read_clipboard", {})
        # Focused, the witness's entry takes typed text (the Rust side reads it back).
        assert payload(await call("input_action", {"action": "type", "text": "typed through mcp"})) == {"ok": True}
        ok("windows")

    # The clipboard only with --enable-clipboard too, reading back what this server wrote.
    async with stdio_client(params("--enable-computer-use", "--enable-clipboard", extra_env=desktop)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await check_listing(session, FILE_TOOLS + COMPUTER_TOOLS + ["read_clipboard", "write_clipboard"])
        assert payload(await session.call_tool("write_clipboard", {"content": "from mcp"})) == {"ok": True}
        got = payload(await session.call_tool("read_clipboard", {}))
        assert got["content"] == "from mcp" and got["format"] == "text", got
        await protocol_error(session, "write_clipboard", {"content": 5})
        await protocol_error(session, "read_clipboard", {"format": "image"})
        ok("clipboard")


async def desktop():
    """Displays, the pointer, apps and the accessibility tree on the private desktop, each
    with good and bad input."""
    width, height = screen_size()
    title = os.environ["MCP_WITNESS_TITLE"]
    witness_pid = int(os.environ["MCP_WITNESS_PID"])
    env = desktop_env()
    async with stdio_client(params("--enable-computer-use", extra_env=env)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        call = session.call_tool
        info = payload(await call("display_info", {}))
        monitor = {"index": 0, "primary": True, "physical_size": [width, height], "logical_size": [width, height], "scale": 1.0, "origin": [0, 0]}
        assert info == {"monitors": [monitor]}, info
        await protocol_error(session, "display_info", {"monitor": 0})
        ok("display_info")

        point = [width // 3 + 7, height // 4 + 3]
        assert payload(await call("input_action", {"action": "mouse_move", "coordinate": point})) == {"ok": True}
        at = payload(await call("cursor_position", {}))
        assert at == {"x": point[0], "y": point[1], "monitor": 0}, at
        # The X server's own account, not only the server's.
        located = subprocess.run(["xdotool", "getmouselocation"], env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout
        assert located.startswith(f"x:{point[0]} y:{point[1]} "), located
        await protocol_error(session, "cursor_position", {"monitor": 0})
        await protocol_error(session, "cursor_position", {"x": "here"})
        ok("cursor_position")

        apps = payload(await call("list_apps", {}))["apps"]
        mine = [app for app in apps if app["pid"] == witness_pid]
        assert len(mine) == 1, apps
        assert mine[0]["window_count"] == 1 and mine[0]["name"].startswith("python3"), mine
        message = await protocol_error(session, "list_apps", {"include_background": "yes"})
        assert "`include_background`" in message, message
        ok("list_apps")

        launched = payload(await call("launch_app", {"executable_path": "/bin/sleep", "args": ["30"]}))
        pid = launched.get("pid")
        try:
            assert launched == {"ok": True, "pid": pid} and isinstance(pid, int), launched
            assert Path(f"/proc/{pid}/cmdline").read_bytes() == b"/bin/sleep\x0030\x00"
            # Its own process group, and the safe environment plus the session's variables:
            # none of the server's configuration.
            assert os.getpgid(pid) == pid
            environ = dict(item.split(b"=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in item)
            assert environ[b"DISPLAY"] == env["DISPLAY"].encode(), environ.keys()
            assert b"AUTOGPT_SHIM_MAX_FILE_SIZE_BYTES" not in environ, environ.keys()
        finally:
            if isinstance(pid, int):
                os.kill(pid, signal.SIGTERM)
        assert await wait_gone(pid, 5), f"launched {pid} outlived its SIGTERM"
        failed(await call("launch_app", {"executable_path": "/no/such/program"}), "INTERNAL_ERROR", "the desktop operation failed: the program could not be started: No such file or directory (os error 2)")
        failed(await call("launch_app", {"args": ["30"]}), "FEATURE_NOT_SUPPORTED", "app.launch is not supported here: name the executable_path to launch on this OS")
        message = await protocol_error(session, "launch_app", {"executable_path": "/bin/sleep", "args": "30"})
        assert "`args`" in message, message
        ok("launch_app")

        windows = payload(await call("list_windows", {}))
        listed = [w for w in windows["windows"] if w["title"] == title]
        assert len(listed) == 1, windows
        window_id, bounds = listed[0]["window_id"], listed[0]["bounds"]
        snapshot = payload(await call("accessibility_snapshot", {"window_id": window_id, "deadline_ms": 8000}))
        buttons = [e for e in snapshot["elements"] if e["label"] == "Press me"]
        assert len(buttons) == 1 and buttons[0]["role"] == "button" and "enabled" in buttons[0]["states"], snapshot
        box = buttons[0]["box"]
        assert box[0] >= bounds[0] and box[1] >= bounds[1] and box[2] <= bounds[2] and box[3] <= bounds[3], (box, bounds)
        # The bounds of max_elements: 1 and 500 are taken (the button is the one named
        # element), 0 and 501 refused by the payload's rules.
        for good in [1, 500]:
            again = payload(await call("accessibility_snapshot", {"window_id": window_id, "max_elements": good, "deadline_ms": 8000}))
            assert again == snapshot, (good, again, snapshot)
        failed(await call("accessibility_snapshot", {"window_id": "w-stale"}), "WINDOW_STALE")
        for bad in [0, 501]:
            refused = failed(await call("accessibility_snapshot", {"window_id": window_id, "max_elements": bad}), "INTERNAL_ERROR", "invalid A11Y_SNAPSHOT_REQUEST payload")
            assert refused["details"] == {"message_type": "A11Y_SNAPSHOT_REQUEST", "field": "max_elements"}, refused
        await protocol_error(session, "accessibility_snapshot", {"window_id": window_id, "max_elements": -1})
        await protocol_error(session, "accessibility_snapshot", {"max_elements": 5})
        ok("accessibility_snapshot")


async def paged_read(call, path, encoding, budget):
    """Reads `path` page by page through next_offset; every answer within the budget."""
    pieces, offset, pages = [], 0, 0
    while True:
        result = await call("read_file", {"path": path, "encoding": encoding, "offset": offset})
        assert len(result.content[0].text) <= budget, len(result.content[0].text)
        page = payload(result)
        pieces.append(page["content"])
        pages += 1
        if "next_offset" not in page:
            assert page["truncated"] is False, page
            break
        assert page["truncated"] is True and f"offset {page['next_offset']}" in page["note"], page
        assert page["next_offset"] == offset + page["size_bytes"], page
        offset = page["next_offset"]
    return pieces, pages


async def budget():
    """Every answer within --max-answer-chars: long files read in pages, listings page with
    offset, and a command's output keeps its head and tail."""
    limit = 5000
    extra = {"AUTOGPT_SHIM_MAX_FILE_SIZE_BYTES": str(1 << 20)}
    server = params("--enable-shell", "--max-answer-chars", str(limit), extra_env=extra)
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await check_listing(session, FILE_TOOLS + ["run_command"])
        assert f"at most {limit} characters" in tools["read_file"].description, tools["read_file"].description
        call = session.call_tool

        # Quotes, newlines and two- and four-byte characters: escaping and UTF-8 pages.
        text = "".join(f'line {i}: "\u00e9t\u00e9" \U0001F600\n' for i in range(1500))
        (ROOT / "long.txt").write_text(text, encoding="utf-8")
        pieces, pages = await paged_read(call, "long.txt", "utf-8", limit)
        assert "".join(pieces) == text and pages >= 5, pages
        raw = os.urandom(20_000)
        (ROOT / "long.bin").write_bytes(raw)
        pieces, pages = await paged_read(call, "long.bin", "base64", limit)
        assert b"".join(base64.b64decode(piece) for piece in pieces) == raw and pages >= 5, pages
        ok("long_files_read_in_pages")

        names = [f"entry-{i:04}.txt" for i in range(300)]
        for name in names:
            (ROOT / "many" / name).parent.mkdir(exist_ok=True)
            (ROOT / "many" / name).write_text("x")
        seen, offset, pages = [], 0, 0
        while True:
            result = await call("list_directory", {"path": "many", "offset": offset})
            assert len(result.content[0].text) <= limit, len(result.content[0].text)
            page = payload(result)
            seen += [entry["name"] for entry in page["entries"]]
            pages += 1
            if "next_offset" not in page:
                break
            assert page["truncated"] is True and "offset" in page["note"], page
            offset = page["next_offset"]
        assert seen == names and pages >= 5, (pages, len(seen))
        ok("listings_page_with_offset")

        loud = payload(await call("run_command", {"command": "seq 1 20000; echo done >&2", "shell": "sh"}))
        out = loud["stdout"]
        assert out.startswith("1\n2\n3\n") and out.endswith("19999\n20000\n"), (out[:20], out[-20:])
        assert " characters elided ...]\n" in out and loud["output_truncated"] is True, out
        assert loud["stderr"] == "done\n" and "stdout keeps its start and end" in loud["note"], loud
        ok("command_output_keeps_head_and_tail")


async def roots():
    """The client's MCP roots narrow the file tools within the allowed root; a root outside is
    ignored with a log line; a change of roots applies; nothing widens the allowed root."""
    for name in ["proj", "other"]:
        (ROOT / name).mkdir()
        (ROOT / name / f"{name}.txt").write_text(name)
    (ROOT / "proj" / "link").symlink_to(ROOT / "other")
    listed = [ROOT / "proj", OUTSIDE]
    asked = asyncio.Event()

    async def list_roots(context):
        asked.set()
        return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=path.as_uri()) for path in listed])

    errlog_path = HOME / "roots.stderr"
    with open(errlog_path, "w") as errlog:
        async with stdio_client(params("--enable-shell"), errlog=errlog) as (read, write), ClientSession(read, write, list_roots_callback=list_roots) as session:
            await session.initialize()
            call = session.call_tool
            # The first call waits for the roots: it never runs on the whole allowed root.
            failed(await call("read_file", {"path": "other/other.txt"}), "PATH_OUTSIDE_ALLOWED_ROOT")
            assert asked.is_set()
            assert payload(await call("read_file", {"path": "proj/proj.txt"}))["content"] == "proj"
            assert payload(await call("write_file", {"path": "proj/new.txt", "content": "n"}))["ok"]
            # Through a symlink inside the root into the rest of the allowed root: refused.
            failed(await call("read_file", {"path": "proj/link/other.txt"}), "PATH_OUTSIDE_ALLOWED_ROOT")
            failed(await call("read_file", {"path": "proj/../other/other.txt"}), "PATH_OUTSIDE_ALLOWED_ROOT")
            failed(await call("list_directory", {"path": "."}), "PATH_OUTSIDE_ALLOWED_ROOT")
            failed(await call("move", {"src": "proj/new.txt", "dst": "other/new.txt"}), "PATH_OUTSIDE_ALLOWED_ROOT")
            # The root outside the allowed root widens nothing.
            failed(await call("read_file", {"path": str(OUTSIDE / "secret.txt")}), "PATH_OUTSIDE_ALLOWED_ROOT")
            # A command's working folder: the first root by default, never outside the roots.
            assert payload(await call("run_command", {"argv": ["pwd"]}))["stdout"] == f"{ROOT / 'proj'}\n"
            failed(await call("run_command", {"argv": ["pwd"], "cwd": "other"}), "PATH_OUTSIDE_ALLOWED_ROOT")
            ok("roots_narrow_the_tools")

            listed[:] = [ROOT / "other"]
            asked.clear()
            await session.send_roots_list_changed()
            await asyncio.wait_for(asked.wait(), 10)
            assert payload(await call("read_file", {"path": "other/other.txt"}))["content"] == "other"
            failed(await call("read_file", {"path": "proj/proj.txt"}), "PATH_OUTSIDE_ALLOWED_ROOT")
            ok("a_change_of_roots_applies")

            listed[:] = [ROOT.parent]
            asked.clear()
            await session.send_roots_list_changed()
            await asyncio.wait_for(asked.wait(), 10)
            # A root holding the allowed root narrows nothing, and widens nothing either.
            assert payload(await call("read_file", {"path": "proj/proj.txt"}))["content"] == "proj"
            failed(await call("read_file", {"path": str(OUTSIDE / "secret.txt")}), "PATH_OUTSIDE_ALLOWED_ROOT")
            ok("no_root_widens_the_allowed_root")
    stderr = errlog_path.read_text()
    assert f"root={OUTSIDE.as_uri()}" in stderr and "it is outside the allowed root" in stderr, stderr
    assert (OUTSIDE / "secret.txt").read_text() == "secret"


SCENARIOS = {
    "files": lambda: asyncio.run(files()),
    "shell": lambda: asyncio.run(shell()),
    "powers": lambda: asyncio.run(powers()),
    "budget": lambda: asyncio.run(budget()),
    "roots": lambda: asyncio.run(roots()),
    "stdin": stdin_close,
    "computer": lambda: asyncio.run(computer()),
    "desktop": lambda: asyncio.run(desktop()),
}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
