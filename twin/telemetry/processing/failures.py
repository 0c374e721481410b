"""Failed cards in the live state, handed to self-healing (``twin.jobs.healing``).

At each tick, after the alert rules, a card counts as failed when one of its
alerts is open *and* its fresh reading says why:

=========  ======================================================  ==============
cause      reading                                                 alert it needs
=========  ======================================================  ==============
``xid79``  last XID = 79, "GPU has fallen off the bus"             ``xid``
``ecc``    ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`` > 0 (uncorrectable),  ``ecc``/``xid``
           or XID 48 (DBE), 64 (row-remap failure), 95
           (uncontained ECC)
``silent`` no reading for ``TWIN_HEAL_SILENT_S`` (default 10 s)    ``stale``
           while its rack still reports (a lost heartbeat; a
           silent rack or cluster is an agent or network fault,
           not a dead card)
``link``   intra-supernode link latency > 500 ns (re-route)        ``link_latency_critical``
=========  ======================================================  ==============

The open alert's id is the failure's *episode*: the same reading arriving again
keeps the alert open, so it is the same episode, and the remediation's unique
``(card, episode)`` refuses a second. Cheaper still, the cards handed over at the
last tick are kept as packed bits (``keys.failing``): a card that keeps failing
is handed over once, not at every tick; once it reads healthy again it can fail
anew. Everything here is a numpy mask over the cluster, plus one query for the
episodes of the (few) new failures.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import redis
from django.conf import settings

from twin.telemetry import keys
from twin.telemetry.choices import AlertRuleChoices as R
from twin.telemetry.metrics import METRIC_INDEX
from twin.telemetry.state import Layout

__all__ = ["ECC_XIDS", "FATAL_XIDS", "Failure", "detect_failures", "handle_failures",
           "silent_after_s"]

log = logging.getLogger(__name__)

FATAL_XIDS = frozenset({79})
"""XID 79: the GPU has fallen off the bus (NVIDIA, "XID Errors", r555 table)."""
ECC_XIDS = frozenset({48, 64, 95})
"""XID 48 double-bit ECC, 64 ECC page retirement / row-remapper failure, 95 uncontained
ECC error (NVIDIA, "XID Errors"): the card's memory cannot be trusted."""

#: (cause, the alert rule whose open alert is the episode)
_RULE_OF = {"xid79": R.XID, "ecc": R.ECC, "silent": R.STALE, "link": R.LINK_LATENCY_CRITICAL}


def silent_after_s() -> float:
    """Seconds without a reading after which a card counts as dead (a lost heartbeat)."""
    return float(getattr(settings, "TWIN_HEAL_SILENT_S", 10.0))


@dataclass(frozen=True)
class Failure:
    """One new failure, as the heal follow-up receives it (JSON-able)."""

    card: int
    cause: str
    episode: int
    detail: str
    reading_at: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def detect_failures(r: redis.Redis, lay: Layout, cluster_id: int, *, fresh_values: np.ndarray,
                    stale: np.ndarray, age: np.ndarray, seen: np.ndarray,
                    card_alerts: dict[int, list[tuple[str, str]]],
                    key: str | None = None) -> list[Failure]:
    """The cards that failed since the last tick (see the module docstring); a tick
    shard passes its slice of the cluster as ``lay`` and its own ``key``."""
    from twin.telemetry.models import Alert

    n = lay.n
    if not n:
        return []
    xid = fresh_values[METRIC_INDEX["xid_errors"]]
    ecc = fresh_values[METRIC_INDEX["ecc_errors"]]
    link = fresh_values[METRIC_INDEX["link_latency_ns"]]
    open_rules = np.zeros((4, n), bool)
    order = list(_RULE_OF)
    for o, active in card_alerts.items():
        names = {rule for rule, _ in active}
        for k, cause in enumerate(order):
            if _RULE_OF[cause] in names or (cause == "ecc" and R.XID in names):
                open_rules[k, o] = True
    with np.errstate(invalid="ignore"):
        causes = np.stack([
            np.isin(xid, list(FATAL_XIDS)),
            (ecc > 0) | np.isin(xid, list(ECC_XIDS)),
            stale & (age >= silent_after_s()),
            link > 500.0,
        ]) & open_rules
    failing = causes.any(axis=0)
    key = key or keys.failing(cluster_id, lay.version)
    raw = r.get(key)
    before = (np.unpackbits(np.frombuffer(raw, np.uint8), count=n).astype(bool)
              if raw and len(raw) == (n + 7) // 8 else np.zeros(n, bool))
    new = np.flatnonzero(failing & ~before)
    if failing.any() or before.any():
        r.set(key, np.packbits(failing).tobytes())
    if not len(new):
        return []
    cause_of = {int(o): order[int(np.argmax(causes[:, o]))] for o in new}
    card_ids = {int(o): int(lay.card_ids[o]) for o in new}
    subjects = [f"card:{cid}" for cid in card_ids.values()]
    episodes = {(rule, subject): pk for rule, subject, pk in Alert.objects.filter(
        cluster_id=cluster_id, ended__isnull=True, subject__in=subjects,
        rule__in=set(_RULE_OF.values())).values_list("rule", "subject", "id")}
    out = []
    for o, cause in cause_of.items():
        subject = f"card:{card_ids[o]}"
        episode = episodes.get((_RULE_OF[cause], subject))
        if episode is None and cause == "ecc":
            episode = episodes.get((R.XID, subject))
        if episode is None:
            continue  # its alert is not written yet: the next tick sees it
        detail = {"xid79": f"XID {xid[o]:.0f}: GPU has fallen off the bus",
                  "ecc": (f"XID {xid[o]:.0f}" if np.isin(xid[o], list(ECC_XIDS)) else
                          f"{ecc[o]:.0f} uncorrectable ECC errors (DBE)"),
                  "silent": f"no telemetry for {age[o]:.0f} s",
                  "link": f"link latency {link[o]:.0f} ns (limit 500 ns)"}[cause]
        reading = float(seen[o]) if np.isfinite(seen[o]) else None
        out.append(Failure(card_ids[o], cause, int(episode), detail, reading))
    if len(out) < len(new):  # forget the ones without an episode yet: retried next tick
        missing = [o for o in new if int(lay.card_ids[o]) not in {f.card for f in out}]
        failing[missing] = False
        r.set(key, np.packbits(failing).tobytes())
    return out


def handle_failures(failures: list[dict[str, Any]]) -> list[int]:
    """Propose (and, by the cluster's policy, apply) a remediation per failure; the ids
    of the remediations written (a failure already handled writes none)."""
    from twin.jobs.healing import handle_failure

    done = []
    for f in failures:
        reading = f.get("reading_at")
        try:
            rem = handle_failure(
                int(f["card"]), str(f["cause"]), int(f["episode"]), detail=str(f["detail"]),
                reading_at=dt.datetime.fromtimestamp(reading, tz=dt.UTC) if reading else None)
        except Exception:
            log.exception("self-healing of card %s (%s) failed", f.get("card"), f.get("cause"))
            continue
        if rem is not None:
            done.append(rem.pk)
    return done
