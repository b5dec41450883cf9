"""A synthetic access log of a payments service, the kind its web servers write (combined log
format with the response time last, as nginx's `$request_time`): no real data, the same lines
for the same seed.

The service, as the built-in target plays it (each endpoint a route the target serves, its work
the route's delay inside the capacity model's slot):

    POST /delay/3     a payment           (the seed's "request 1")
    GET  /delay/1     a payment's status  ("request 2", twice as many as payments)
    PUT  /delay/5     a transfer          ("request 3")
    GET  /bytes/256   a wallet's history  ("request 4", twice as many as transfers)
    GET  /status/200  a health check      (the long tail the plan leaves out)

Traffic over the log's hours follows a day's shape, its busiest minute in the last hour.

    python3 make_log.py access.log [--hours 3] [--mean-rps 6] [--seed 2]
"""

from __future__ import annotations

import argparse
import datetime
import math
import random

ENDPOINTS = [
    # (method, path, share of the requests, mean response time s)
    ("POST", "/delay/3", 0.20, 0.013),
    ("GET", "/delay/1", 0.40, 0.011),
    ("PUT", "/delay/5", 0.12, 0.015),
    ("GET", "/bytes/256", 0.24, 0.010),
    ("GET", "/status/200", 0.04, 0.009),
]
AGENTS = ["wallet-android/7.3", "wallet-ios/7.3", "shop-gateway/2.1"]
BYTES = {"/bytes/256": 256, "/status/200": 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--hours", type=float, default=3.0)
    parser.add_argument("--mean-rps", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=2)
    options = parser.parse_args()
    draw = random.Random(options.seed)
    start = datetime.datetime(2026, 11, 20, 9, 0, 0, tzinfo=datetime.timezone.utc)
    seconds = int(options.hours * 3600)
    weights = [share for _, _, share, _ in ENDPOINTS]
    with open(options.out, "w") as log:
        for second in range(seconds):
            # A day's swell: quiet at the start, busiest near the end.
            level = options.mean_rps * (0.4 + 1.2 * math.sin(math.pi * (second / seconds) * 0.9) ** 2)
            for _ in range(_poisson(draw, level)):
                method, path, _, mean_s = draw.choices(ENDPOINTS, weights)[0]
                at = start + datetime.timedelta(seconds=second + draw.random())
                client = f"10.{draw.randint(0, 3)}.{draw.randint(0, 255)}.{draw.randint(1, 254)}"
                took = draw.expovariate(1 / mean_s) * 0.3 + mean_s * 0.7
                log.write(
                    f'{client} - - [{at.strftime("%d/%b/%Y:%H:%M:%S +0000")}] "{method} {path} HTTP/1.1" 200 '
                    f'{BYTES.get(path, 3)} "-" "{draw.choice(AGENTS)}" {took:.3f}\n'
                )


def _poisson(draw: random.Random, mean: float) -> int:
    # Knuth's method: the means here are small.
    limit, count, product = math.exp(-mean), 0, draw.random()
    while product > limit:
        count += 1
        product *= draw.random()
    return count


if __name__ == "__main__":
    main()
