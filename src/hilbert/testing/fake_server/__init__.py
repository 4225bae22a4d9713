"""hilbert's fake model server: a real HTTP server speaking Anthropic Messages, OpenAI Chat
Completions and OpenAI Responses (streamed and not, tool calls, usage with a simulated prompt
cache), answered by a pluggable `Policy`, with injectable faults and latency.

    policy.py                  the Conversation → Reply contract (fixed)
    policies.py                the registry (`make_policy`) and the scripted / echo policies
    wire.py                    what the wire modules share (parsed request, SSE frames, ids)
    anthropic_wire.py, openai_chat_wire.py, openai_responses_wire.py   one protocol each
    usage.py                   token counting and the prompt cache
    faults.py                  fault and latency specs
    streaming.py               paced / cut / hung ASGI responses
    recording.py               the JSONL request log
    app.py                     routing and the life of one request
    server.py                  `FakeServer` (tests, background thread) and `serve` (foreground)
"""

from hilbert.testing.fake_server.policies import EchoPolicy, ScriptedPolicy, make_policy
from hilbert.testing.fake_server.policy import Conversation, Policy, Reply
from hilbert.testing.fake_server.server import FakeServer, serve

__all__ = [
    "Conversation",
    "EchoPolicy",
    "FakeServer",
    "Policy",
    "Reply",
    "ScriptedPolicy",
    "make_policy",
    "serve",
]
