"""``horde link``: an emulated network link (delay, jitter, loss, duplicates, reordering) to a
namespace where a command runs, for TCP and any protocol. ``register(app)`` adds the command."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from horde.cli.arguments import HordeCommand
from horde.cli.terminal import stdout

EPILOG = """Examples:

  horde link --delay-ms 50 --jitter-ms 10 --rate-mbit 10

  horde link --loss-percent 5 --seed 7

  sudo horde link --delay-ms 20 --loss-percent 10 -- horde target --host 0.0.0.0 --tcp-port 7000

Without a command the link holds until Ctrl-C (ip netns exec NAME COMMAND runs anything inside);
the generator reaches the namespace at the address printed (10.77.0.2 for the first link).
Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN): exit code 17 when the link cannot be built."""


def register(app: typer.Typer) -> None:
    """Add ``link`` to ``app``."""
    app.command("link", cls=HordeCommand, epilog=EPILOG, context_settings={"allow_interspersed_args": False})(link)


def link(
    command: Annotated[
        Optional[list[str]],
        typer.Argument(help="the command to run inside the namespace (after --), e.g. horde target ..."),
    ] = None,
    delay_ms: Annotated[float, typer.Option("--delay-ms", help="added to every packet, each way")] = 0.0,
    jitter_ms: Annotated[
        float, typer.Option("--jitter-ms", help="each packet's delay drawn uniformly in delay ± jitter")
    ] = 0.0,
    loss_percent: Annotated[float, typer.Option("--loss-percent", help="packets dropped, each way")] = 0.0,
    duplicate_percent: Annotated[
        float, typer.Option("--duplicate-percent", help="packets delivered twice, each way")
    ] = 0.0,
    reorder_percent: Annotated[
        float,
        typer.Option(
            "--reorder-percent", help="packets held back one more delay + jitter, so later ones overtake them"
        ),
    ] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="the draws' seed: the same seed, the same impairment")] = 1,
    rate_mbit: Annotated[
        Optional[float],
        typer.Option(
            "--rate-mbit",
            help="a bottleneck each way (a token bucket of 1,500 bytes filled at this rate, as network.rate_limit)",
        ),
    ] = None,
    queue_ms: Annotated[
        float,
        typer.Option(
            "--queue-ms", help="with --rate-mbit: the longest a packet waits for the bottleneck before it is dropped"
        ),
    ] = 100.0,
) -> int:
    """Run COMMAND (the system under test) in a network namespace reached through a link Horde emulates: TCP sees real loss and retransmits. Needs root."""
    from horde.engine.link import LinkOptions, serve

    options = LinkOptions(
        delay_ms=delay_ms,
        jitter_ms=jitter_ms,
        loss_percent=loss_percent,
        duplicate_percent=duplicate_percent,
        reorder_percent=reorder_percent,
        seed=seed,
        rate_mbit=rate_mbit,
        queue_ms=queue_ms,
    )
    return serve(stdout, options, command or [])
