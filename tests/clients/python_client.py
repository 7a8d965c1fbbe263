"""The Python MCP SDK client (`mcp` 2.3.0) as a user would run it, driven by tests/clients/python.test.ts.

Usage: python python_client.py <plan-json>
plan: {"timeoutS": float,
       "targets": [{"key": str, "url": str, "runs": [{"mode": "legacy" | "auto" | "2026-07-28", "longTask": {...}}]}]}

Every run (a target's URL in one mode) is a client of its own, and all of them run at once: one
interpreter start for the whole matrix. A run connects in its mode, calls test_simple_text and
then long_task with the given arguments. The script prints one JSON document, per target key the
runs: the negotiated protocol version, what each call returned, the steps seen as log and as
progress notifications, and every HTTP request the client made (to count reconnects). A failing
run reports its error; the others are unaffected.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def _rpc_method(request: httpx2.Request) -> str | None:
    if request.method != "POST":
        return None
    try:
        body = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return None
    return body.get("method") if isinstance(body, dict) else None


def _mcp_error_code(error: BaseException) -> int | None:
    """The JSON-RPC code of the first MCPError in `error`, looking inside exception groups."""
    if isinstance(error, MCPError):
        return error.code
    for inner in getattr(error, "exceptions", ()):
        if (code := _mcp_error_code(inner)) is not None:
            return code
    cause = error.__cause__ or error.__context__
    return _mcp_error_code(cause) if cause is not None else None


def _content(result: types.CallToolResult) -> dict[str, Any]:
    return {
        "content": [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content],
        "isError": bool(result.is_error),
    }


async def run(url: str, mode: str, long_task: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": mode, "requests": [], "logSteps": [], "progress": []}

    sent: dict[int, dict[str, Any]] = {}

    async def on_request(request: httpx2.Request) -> None:
        record = {
            "method": request.method,
            "rpc": _rpc_method(request),
            "lastEventId": request.headers.get("last-event-id"),
            "sessionId": request.headers.get("mcp-session-id"),
            "protocolVersion": request.headers.get("mcp-protocol-version"),
            "status": None,
        }
        sent[id(request)] = record
        out["requests"].append(record)

    async def on_response(response: httpx2.Response) -> None:
        record = sent.get(id(response.request))
        if record is not None:
            record["status"] = response.status_code

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        if isinstance(params.data, dict) and isinstance(params.data.get("step"), int):
            out["logSteps"].append(params.data["step"])

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        out["progress"].append(progress)

    try:
        with anyio.fail_after(timeout_s):
            http = httpx2.AsyncClient(timeout=httpx2.Timeout(timeout_s), event_hooks={"request": [on_request], "response": [on_response]})
            async with http:
                # log_level opts in to notifications/message on 2026-07-28 (per request); a 2025
                # session gets them without it.
                client = Client(
                    streamable_http_client(url, http_client=http),
                    mode=mode,
                    logging_callback=on_log,
                    log_level="info",
                    read_timeout_seconds=timeout_s,
                )
                async with client:
                    out["protocolVersion"] = client.protocol_version
                    out["simpleText"] = _content(await client.call_tool("test_simple_text", {}))
                    result = await client.call_tool("long_task", long_task, progress_callback=on_progress)
                    out["longTask"] = _content(result)
    except Exception as error:  # report and go on: one run's failure must not hide the others
        # The innermost frames say what went wrong; a whole anyio exception group is pages long.
        out["error"] = "".join(traceback.format_exception(error))[-3000:]
        out["errorCode"] = _mcp_error_code(error)
    return out


async def main() -> None:
    plan = json.loads(sys.argv[1])
    results: dict[str, list[dict[str, Any]]] = {target["key"]: [] for target in plan["targets"]}

    async def one(key: str, url: str, spec: dict[str, Any]) -> None:
        results[key].append(await run(url, spec["mode"], spec["longTask"], plan["timeoutS"]))

    async with anyio.create_task_group() as tg:
        for target in plan["targets"]:
            for spec in target["runs"]:
                tg.start_soon(one, target["key"], target["url"], spec)
    print(json.dumps(results))


if __name__ == "__main__":
    anyio.run(main)
