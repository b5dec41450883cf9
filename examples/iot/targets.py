"""Starts COUNT built-in targets in this one process, sharing one resource (the platform's
database: each request holds it SERIAL_MS ms and CROSSTALK_MS ms more per other busy instance),
writes their base URLs to a JSON file once they listen, and serves until SIGTERM or Ctrl-C.
The resource is shared by the targets of one process, so the instances of a study must be
started together, here, rather than as separate `horde target` processes.

    python targets.py URLS.json --count 5 --workers 2 --service-ms 19 --serial-ms 1 --crosstalk-ms 0.1
"""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path

from horde.control.scale import builtin_instances


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("urls", type=Path)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--service-ms", type=float, required=True)
    parser.add_argument("--serial-ms", type=float, required=True)
    parser.add_argument("--crosstalk-ms", type=float, required=True)
    options = parser.parse_args()
    stop = {signal.SIGTERM, signal.SIGINT}
    # Blocked before the targets start, so that a signal arriving while they do waits for sigwait.
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    shared = (options.serial_ms, options.crosstalk_ms)
    with builtin_instances(
        options.count, workers=options.workers, service_ms=options.service_ms, shared=shared
    ) as urls:
        written = options.urls.with_suffix(".part")
        written.write_text(json.dumps(urls))
        written.rename(options.urls)  # whole, or not there: run.sh waits for the file
        signal.sigwait(stop)


if __name__ == "__main__":
    main()
