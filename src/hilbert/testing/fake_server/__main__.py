"""`python -m hilbert.testing.fake_server`: the fake server in the foreground, for benchmarks, with
only the responders shipped here (scripted, echo). `hilbert fake-server` (the CLI) takes the same
flags and also knows the simulation's responders (engineer, lead, ...: `hilbert.sim`)."""

from __future__ import annotations

import argparse
import sys

from hilbert.errors import UserError
from hilbert.testing.fake_server.server import serve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hilbert.testing.fake_server", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--responder",
        "--policy",
        dest="responder",
        default="echo",
        help="NAME or NAME:key=value,... (scripted:file=PATH, echo); --policy is its old name",
    )
    parser.add_argument("--latency", default=None, help="none, realistic, or e.g. ttft=0.5,tps=80")
    parser.add_argument("--faults", default=None, help="e.g. 429=0.1,529=0.05,truncate=0.05")
    parser.add_argument(
        "--rate-limit", default=None, help="e.g. rpm=600,itpm=200000,otpm=40000,change_after=30,factor=0.5"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", default=None, help="append every request to this JSONL file")
    args = parser.parse_args(argv)
    try:
        serve(
            port=args.port,
            responder=args.responder,
            latency=args.latency,
            faults=args.faults,
            rate_limit=args.rate_limit,
            seed=args.seed,
            record=args.record,
            host=args.host,
        )
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
