"""A separate process that appends to an event log, for the multi-process tests (run as a script).

    python store_writer.py DB RUN TAG COUNT [--agents A,B] [--wait-go] [--print] [--messages] [--delay S]

Appends COUNT events (forever when COUNT is 0) of kind "tick" with data {"tag": TAG, "i": i}, cycling
through the agents. --wait-go prints "ready" and waits for a line on stdin before writing, so that
several writers start together. --print prints "ID AGENT SEQ I" (flushed) after each append returns,
i.e. once the event is committed. --messages also stores a growing conversation with put_messages
and puts its hashes in the event, as the agent loop does.
"""

from __future__ import annotations

import argparse
import sys
import time

from hilbert.models.types import Message
from hilbert.store import EventStore


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("run")
    parser.add_argument("tag")
    parser.add_argument("count", type=int)
    parser.add_argument("--agents", default="a")
    parser.add_argument("--wait-go", action="store_true")
    parser.add_argument("--print", action="store_true")
    parser.add_argument("--messages", action="store_true")
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    agents = args.agents.split(",")
    with EventStore.open(args.db) as store:
        if args.wait_go:
            print("ready", flush=True)
            sys.stdin.readline()
        conversation = [Message("system", "You write ticks."), Message("user", f"tick for {args.tag}")]
        i = 0
        while args.count == 0 or i < args.count:
            data: dict[str, object] = {"tag": args.tag, "i": i}
            if args.messages:
                conversation.append(Message("assistant", f"{args.tag} tick {i}"))
                data["messages"] = store.put_messages(conversation)
            event = store.append(args.run, agents[i % len(agents)], "tick", data)
            if args.print:
                # one write per line (print writes each argument separately when stdout is unbuffered),
                # so a SIGKILL can cut a line short but never leave a shorter line that looks complete
                sys.stdout.write(f"{event.id} {event.agent} {event.seq} {i}\n")
                sys.stdout.flush()
            if args.delay:
                time.sleep(args.delay)
            i += 1


if __name__ == "__main__":
    main()
