"""Choice sets of the jobs on the twin, with colours the admin and dashboard reuse."""
from twin.core.choices import ChoiceSet

__all__ = ["FailureCauseChoices", "JobStateChoices", "QosChoices", "RemediationActionChoices",
           "RemediationStateChoices", "TraceFormatChoices"]


class JobStateChoices(ChoiceSet):
    """Where a submitted job is.

    ``queued``: it did not fit when submitted (or gave its cards back) and holds
    nothing; ``running``: it holds its allocations; ``completed`` / ``cancelled``:
    final, its allocations released. Only a running job holds cards (checked in
    ``Allocation.clean`` and by the submit/cancel service).
    """

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    CHOICES = [
        (QUEUED, "Queued", "gray"),
        (RUNNING, "Running", "blue"),
        (COMPLETED, "Completed", "green"),
        (CANCELLED, "Cancelled", "orange"),
    ]

    #: States a job never leaves.
    FINAL = frozenset({COMPLETED, CANCELLED})
    #: States a job can still be cancelled from.
    ACTIVE = frozenset({QUEUED, RUNNING})


class QosChoices(ChoiceSet):
    """Quality of service, as the Alibaba GPU trace (v2023) labels its pods:
    latency-sensitive (``LS``), best-effort (``BE``), and Kubernetes' classes."""

    LS = "LS"
    BE = "BE"
    BURSTABLE = "Burstable"
    GUARANTEED = "Guaranteed"
    CHOICES = [
        (LS, "Latency-sensitive", "red"),
        (GUARANTEED, "Guaranteed", "purple"),
        (BURSTABLE, "Burstable", "blue"),
        (BE, "Best effort", "gray"),
    ]


class TraceFormatChoices(ChoiceSet):
    """Trace formats ``simulation.scheduling`` reads (the same names as ``replay_trace``)."""

    ALIBABA = "alibaba-gpu-2023"
    HELIOS = "helios"
    PHILLY = "philly"
    CHOICES = [
        (ALIBABA, "Alibaba GPU trace v2023", "orange"),
        (HELIOS, "Helios cluster_log.csv", "blue"),
        (PHILLY, "Philly cluster_job_log", "green"),
    ]


class FailureCauseChoices(ChoiceSet):
    """Why live telemetry says a card failed (``twin.telemetry.processing.failures``).

    ``xid79``: the driver's XID 79, "GPU has fallen off the bus"; ``ecc``: an
    uncorrectable (double-bit) ECC error — ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`` above 0,
    or XID 48 (DBE), 64 (row-remapping failure), 95 (uncontained ECC); ``silent``: no
    reading for ``TWIN_HEAL_SILENT_S`` seconds while its rack still reports (a lost
    heartbeat); ``link``: its scale-up links past the 500 ns limit (a network fault:
    re-route, the card keeps its work).
    """

    XID79 = "xid79"
    ECC = "ecc"
    SILENT = "silent"
    LINK = "link"
    CHOICES = [
        (XID79, "XID 79: fallen off the bus", "red"),
        (ECC, "Uncorrectable ECC / row-remap failure", "red"),
        (SILENT, "Silent (heartbeat lost)", "gray"),
        (LINK, "Network: links past 500 ns", "orange"),
    ]
    #: Causes that take the card out of service (a network fault does not).
    CARD_FAILED = frozenset({XID79, ECC, SILENT})


class RemediationStateChoices(ChoiceSet):
    """Where a remediation is: ``proposed`` (waiting for an operator, or for the
    cluster's policy), ``applied`` (the twin reallocated), ``rejected`` (an operator
    declined it), ``failed`` (applying it was impossible: the spare was taken, …)."""

    PROPOSED = "proposed"
    APPLIED = "applied"
    REJECTED = "rejected"
    FAILED = "failed"
    CHOICES = [
        (PROPOSED, "Proposed", "orange"),
        (APPLIED, "Applied", "green"),
        (REJECTED, "Rejected", "gray"),
        (FAILED, "Failed", "red"),
    ]
    FINAL = frozenset({APPLIED, REJECTED, FAILED})


class RemediationActionChoices(ChoiceSet):
    """What a proposal does for one job on the failed card."""

    SPARE = "spare"
    REROUTE = "reroute"
    NONE = "none"
    CHOICES = [
        (SPARE, "Move to a spare card", "blue"),
        (REROUTE, "Re-route around the link", "teal"),
        (NONE, "No spare available", "red"),
    ]
