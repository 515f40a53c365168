"""The oldest Substrate this Orchestrate places work on, and the hold that keeps work off a
node running an older one.

A node reports its Substrate's version when it registers (``RegisterRequest.version``). One
older than :data:`MINIMUM_SUBSTRATE_VERSION` (or reporting none, which only a Substrate from
before versions were reported does) is cordoned with a hold attributed to the
``provisioner``, its reason naming both versions, so ``fuzzball node list`` shows
``cordon(provisioner)``, ``node show`` and the node's events say why, and no new work is
placed there until the node registers again with a Substrate new enough, which releases the
hold. As the release notes have it, a node with ``health.disabled: true`` is never held: it
gets a ``node_hold_refused`` event saying so instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fuzzball_core.orchestrate import events, nodes
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.scheduling import Hold, HoldEffect, HoldSource
from fuzzball_core.store.models import Node, NodeHold
from fuzzball_core.vocabulary import EventKind

#: the oldest Substrate version whose nodes take work (the one place this is defined)
MINIMUM_SUBSTRATE_VERSION = "0.1.0"

#: every version hold's reason starts so: how this module finds its own holds again
REASON_PREFIX = "substrate "

#: who the hold is recorded as placed by
PLACED_BY = "provisioner"

_RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)")


def release_of(version: str) -> tuple[int, ...] | None:
    """The numbers of ``version``'s release (``2.7.0-rc1``, ``v4.4.0``: their leading
    dotted numbers), trailing zeros dropped so ``2.7`` equals ``2.7.0``; None when it
    starts with none."""
    match = _RELEASE.match(version.strip())
    if match is None:
        return None
    numbers = [int(part) for part in match.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def too_old(version: str, minimum: str = MINIMUM_SUBSTRATE_VERSION) -> str | None:
    """The hold reason for a node reporting Substrate ``version``, naming it and
    ``minimum``; None when it is new enough."""
    wanted = release_of(minimum)
    assert wanted is not None, f"MINIMUM_SUBSTRATE_VERSION {minimum!r} is not a version"
    if not version.strip():
        shown = "(no version reported)"
    else:
        have = release_of(version)
        if have is not None and have >= wanted:
            return None
        shown = version.strip()[:64]  # as the node said it, bounded: it is the node's text
    return (
        f"{REASON_PREFIX}{shown} is older than {minimum}, the oldest this Orchestrate places"
        " work on: upgrade the node's Substrate"
    )


def check(
    ctx: EngineContext,
    tx: Transaction,
    node_id: str,
    version: str,
    *,
    health_disabled: bool = False,
    node_holds: Sequence[NodeHold] | None = None,
) -> None:
    """Hold or release the node ``node_id`` as its reported Substrate ``version`` is too
    old or not, in the registration's transaction (``node_holds``: the node's holds, when
    the caller has read them)."""
    node = tx.session.get(Node, node_id)
    assert node is not None, "check runs after the node's registration"
    reason = too_old(version)
    held = [
        row
        for row in (nodes.holds(tx.session, node_id) if node_holds is None else node_holds)
        if row.source == HoldSource.PROVISIONER.value
        and row.effect == HoldEffect.CORDON.value
        and row.reason.startswith(REASON_PREFIX)
    ]
    stale = [row for row in held if row.reason != reason]
    for row in stale:  # upgraded (or another old version): this hold's reason is not true now
        nodes.release_holds(
            ctx, tx, node_id, hold_id=row.id, released_by=f"{PLACED_BY} ({version or 'none'})"
        )
    if reason is None or len(stale) < len(held):
        return  # new enough, or already held for this very reason
    if health_disabled:
        events.record(
            tx,
            EventKind.NODE_HOLD_REFUSED,
            f"cordon hold not placed on {node.name} (health.disabled): {reason}",
            node_id=node_id,
            effect=HoldEffect.CORDON.value,
            source=HoldSource.PROVISIONER.value,
            reason=reason,
        )
        return
    hold = Hold(HoldEffect.CORDON, HoldSource.PROVISIONER, reason, PLACED_BY)
    nodes.add_hold(ctx, tx, node_id, hold, reason, PLACED_BY)
