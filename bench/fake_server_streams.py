"""How many concurrent streams the fake model server holds, and how fast it answers them.

    python bench/fake_server_streams.py --streams 1024 [--latency ttft=0.5,tps=100]

Starts the server in its own process (`python -m hilbert.testing.fake_server`, scripted responder: a
~100-token text and two tool calls per reply), then a separate client process opens N streaming
requests at once, one connection each, spread over the three protocols (Anthropic Messages, OpenAI
Chat Completions with usage, OpenAI Responses). The client is a bare asyncio HTTP/1.1 + SSE reader
so that it measures the server, not an SDK. A stream counts as completed when its full event
sequence arrived (Anthropic: message_start ... 3 content blocks ... message_stop; chat: tool_calls
finish, the usage chunk, [DONE]; Responses: response.created ... 3 output items ... response.completed).
Time to first token is measured from the connect to the first event carrying output.
Both processes raise RLIMIT_NOFILE to what N needs. The last line holds the figures:

    streams=1024 completed=1024 ttft_p50_ms=.. ttft_p99_ms=.. total_p99_ms=.. max_open=.. wall_s=..
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hilbert.testing.fake_server.process import start_process

TEXT = " ".join(["The quick brown fox jumps over the lazy dog."] * 12)
SCRIPT = [
    {
        "text": TEXT,
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": "src/app.py"}},
            {"name": "bash", "arguments": {"command": "python -m pytest -q tests"}},
        ],
    }
]
TOOL = {"name": "bash", "description": "run a command", "schema": {"type": "object", "properties": {}}}
PROTOCOLS = ("anthropic", "openai-chat", "openai-responses")


def raise_open_files(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < needed:
        print(f"warning: RLIMIT_NOFILE hard limit {hard} < {needed}", file=sys.stderr)


def request_for(protocol: str, i: int) -> tuple[str, dict[str, object]]:
    prompt = f"stream {i}: please inspect the project"
    if protocol == "anthropic":
        tool = {"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["schema"]}
        body = {"model": "fake", "max_tokens": 1024, "stream": True, "tools": [tool]}
        return "/v1/messages", body | {"messages": [{"role": "user", "content": prompt}]}
    if protocol == "openai-chat":
        function = {"name": TOOL["name"], "description": TOOL["description"], "parameters": TOOL["schema"]}
        body = {"model": "fake", "stream": True, "stream_options": {"include_usage": True}}
        body |= {"tools": [{"type": "function", "function": function}]}
        return "/v1/chat/completions", body | {"messages": [{"role": "user", "content": prompt}]}
    tool = {
        "type": "function",
        "name": TOOL["name"],
        "description": TOOL["description"],
        "parameters": TOOL["schema"],
    }
    return "/v1/responses", {"model": "fake", "stream": True, "tools": [tool], "input": prompt}


def carries_output(protocol: str, event: str | None, data: str) -> bool:
    if protocol == "anthropic":
        return event == "content_block_delta"
    if protocol == "openai-responses":
        return event in ("response.output_text.delta", "response.function_call_arguments.delta")
    if data == "[DONE]":
        return False
    choices = json.loads(data).get("choices") or [{}]
    delta = choices[0].get("delta") or {}
    return bool(delta.get("content") or delta.get("tool_calls"))


def complete(protocol: str, events: list[tuple[str | None, str]]) -> bool:
    names = [e for e, _ in events]
    if protocol == "anthropic":
        return (
            names[:1] == ["message_start"]
            and names[-1:] == ["message_stop"]
            and names.count("content_block_start") == names.count("content_block_stop") == 3
            and '"stop_reason":"tool_use"' in events[-2][1]
        )
    if protocol == "openai-responses":
        return (
            names[:1] == ["response.created"]
            and names[-1:] == ["response.completed"]
            and names.count("response.output_item.done") == 3
            and '"usage":{' in events[-1][1]
        )
    datas = [d for _, d in events]
    return (
        len(datas) >= 4
        and datas[-1] == "[DONE]"
        and '"usage":{' in datas[-2]
        and '"finish_reason":"tool_calls"' in datas[-3]
    )


class Client:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.open_now = 0
        self.max_open = 0

    async def stream(self, i: int) -> tuple[bool, float | None, float]:
        protocol = PROTOCOLS[i % len(PROTOCOLS)]
        path, body = request_for(protocol, i)
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nAnthropic-Version: 2023-06-01\r\nConnection: close\r\n\r\n"
        )
        started = time.perf_counter()
        first: float | None = None
        events: list[tuple[str | None, str]] = []
        reader, writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        self.open_now += 1
        self.max_open = max(self.max_open, self.open_now)
        try:
            writer.write(head.encode() + data)
            await writer.drain()
            status = await reader.readline()
            headers = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            if b" 200 " not in status or headers.get("transfer-encoding") != "chunked":
                return False, None, time.perf_counter() - started
            buffer = b""
            while size := int((await reader.readline()).split(b";")[0], 16):
                buffer += (await reader.readexactly(size + 2))[:-2]
                while b"\n\n" in buffer:
                    raw, buffer = buffer.split(b"\n\n", 1)
                    fields = dict(line.split(": ", 1) for line in raw.decode().split("\n") if ": " in line)
                    events.append((fields.get("event"), fields.get("data", "")))
                    if first is None and carries_output(protocol, *events[-1]):
                        first = time.perf_counter() - started
        except (OSError, ValueError, asyncio.IncompleteReadError):
            return False, first, time.perf_counter() - started
        finally:
            self.open_now -= 1
            writer.close()
        return complete(protocol, events), first, time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run_client(url: str, streams: int) -> dict[str, object]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    client = Client(host, int(port))
    started = time.perf_counter()
    results = await asyncio.gather(*(client.stream(i) for i in range(streams)))
    wall = time.perf_counter() - started
    ttfts = [first * 1000 for ok, first, _ in results if ok and first is not None]
    totals = [total * 1000 for ok, _, total in results if ok]
    return {
        "streams": streams,
        "completed": sum(1 for ok, _, _ in results if ok),
        "ttft_p50_ms": round(percentile(ttfts, 0.5), 1),
        "ttft_p99_ms": round(percentile(ttfts, 0.99), 1),
        "total_p50_ms": round(percentile(totals, 0.5), 1),
        "total_p99_ms": round(percentile(totals, 0.99), 1),
        "max_open": client.max_open,
        "wall_s": round(wall, 2),
    }


def start_server(latency: str, script: Path) -> tuple[subprocess.Popen[str], str]:
    return start_process("--responder", f"scripted:file={script}", "--latency", latency)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=1024)
    parser.add_argument("--latency", default="ttft=0.5,tps=100", help="the server's latency spec")
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    raise_open_files(args.streams + 256)
    if args.client:
        print(json.dumps(asyncio.run(run_client(args.client, args.streams))), flush=True)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps(SCRIPT))
        server, url = start_server(args.latency, script)
        try:
            command = [sys.executable, __file__, "--client", url, "--streams", str(args.streams)]
            client = subprocess.run(command, capture_output=True, text=True, timeout=600)
        finally:
            server.terminate()
            server.wait(timeout=30)
    if client.returncode != 0 or not client.stdout.strip():
        print(client.stderr, file=sys.stderr)
        raise SystemExit(f"the client failed (exit {client.returncode})")
    figures = json.loads(client.stdout.strip().splitlines()[-1])
    print(f"latency={args.latency} server_exit={server.returncode}")
    print(" ".join(f"{key}={value}" for key, value in figures.items()))
    return 0 if figures["completed"] == args.streams else 1


if __name__ == "__main__":
    sys.exit(main())
