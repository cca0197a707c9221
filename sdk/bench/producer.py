"""`orbitmq bench producer`: send TPS and request RT through the proxy's SendMessage."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence

from orbitmq.bench.load import add_load_arguments, options_from, run_send_load
from orbitmq.bench.stats import format_summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench producer", description=__doc__)
    add_load_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(list(argv or []))
    summary = asyncio.run(run_send_load(options_from(args))).summary()
    if args.json:
        print(json.dumps(summary))
    else:
        print(format_summary(f"producer size={args.size} batch={args.batch} concurrency={args.concurrency}"
                             + (f" rate={args.rate:.0f}/s" if args.rate else ""), summary))
    return 0 if summary["errors"] == 0 else 1
