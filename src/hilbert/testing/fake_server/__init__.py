"""hilbert's fake model server: a real HTTP server speaking Anthropic Messages, OpenAI Chat
Completions and OpenAI Responses (streamed and not, tool calls, usage with a simulated prompt
cache), answered by a pluggable `Responder`, with injectable faults, latency and rate limits.

    responder.py               the Conversation → Reply contract (fixed)
    responders.py              the registry (`register`, `make_responder`) and the scripted / echo responders
    wire.py                    what the wire modules share (parsed request, SSE frames, ids)
    anthropic_wire.py, openai_chat_wire.py, openai_responses_wire.py   one protocol each
    usage.py                   token counting and the prompt cache
    faults.py                  fault and latency specs
    ratelimit.py               rate limits (RPM, input/output TPM) per API key and model, and their headers
    streaming.py               paced / cut / hung ASGI responses
    recording.py               the JSONL request log
    app.py                     routing and the life of one request
    server.py                  `FakeServer` (tests, background thread) and `serve` (foreground)
    process.py, __main__.py    the server in a process of its own

The simulated engineer, lead, judge and the rest live in `hilbert.sim`, which registers them here;
nothing in this package imports it.
"""

from hilbert.testing.fake_server.responder import Conversation, Reply, Responder
from hilbert.testing.fake_server.responders import (
    EchoResponder,
    ScriptedResponder,
    known_responders,
    make_responder,
    register,
)
from hilbert.testing.fake_server.server import FakeServer, serve

__all__ = [
    "Conversation",
    "EchoResponder",
    "FakeServer",
    "Reply",
    "Responder",
    "ScriptedResponder",
    "known_responders",
    "make_responder",
    "register",
    "serve",
]
