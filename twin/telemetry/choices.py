"""Choice sets of the telemetry app, with colours the admin and UI reuse."""
from twin.core.choices import ChoiceSet

__all__ = [
    "AlertRuleChoices",
    "AlertStateChoices",
    "HealthChoices",
    "ScrapeStatusChoices",
    "SeverityChoices",
    "SubjectLevelChoices",
]


class SeverityChoices(ChoiceSet):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"
    CHOICES = [(INFO, "Info", "blue"), (WARNING, "Warning", "orange"),
               (CRITICAL, "Critical", "red")]
    RANK = {INFO: 1, WARNING: 2, CRITICAL: 3}


class AlertRuleChoices(ChoiceSet):
    RACK_POWER = "rack_power"
    GPU_TEMP = "gpu_temp"
    GPU_TEMP_CRITICAL = "gpu_temp_critical"
    MEM_TEMP = "mem_temp"
    CARD_POWER = "card_power"
    LINK_LATENCY = "link_latency"
    LINK_LATENCY_CRITICAL = "link_latency_critical"
    RDMA_LATENCY = "rdma_latency"
    XID = "xid"
    ECC = "ecc"
    STALE = "stale"
    RACK_SILENT = "rack_silent"
    CLUSTER_SILENT = "cluster_silent"
    UTIL_DROP = "util_drop"
    CHECKPOINT_SLOW = "checkpoint_slow"
    AGENT_ROTATED_SILENT = "agent_rotated_silent"
    COOLANT_SUPPLY = "coolant_supply"
    COOLANT_FLOW = "coolant_flow"
    CDU_LOAD = "cdu_load"
    FEED_HEADROOM = "feed_headroom"
    MODEL_DRIFT = "model_drift"
    CDU_LEAK = "cdu_leak"
    FEED_FAILED = "feed_failed"
    CHOICES = [
        (RACK_POWER, "Rack power over budget", "red"),
        (GPU_TEMP, "GPU temperature high", "orange"),
        (GPU_TEMP_CRITICAL, "GPU temperature critical", "red"),
        (MEM_TEMP, "HBM temperature high", "orange"),
        (CARD_POWER, "Card power over TDP", "orange"),
        (LINK_LATENCY, "Link latency over the 200 ns spec", "orange"),
        (LINK_LATENCY_CRITICAL, "Link latency over the 500 ns limit", "red"),
        (RDMA_LATENCY, "RDMA latency over 2 µs", "orange"),
        (XID, "XID error", "red"),
        (ECC, "Uncorrectable ECC errors", "red"),
        (STALE, "Card silent (stale)", "gray"),
        (RACK_SILENT, "Every card of a rack silent", "gray"),
        (CLUSTER_SILENT, "No telemetry from the cluster", "red"),
        (UTIL_DROP, "Sudden utilization drop", "orange"),
        (CHECKPOINT_SLOW, "Checkpoint write over 15 s", "orange"),
        (AGENT_ROTATED_SILENT, "Agent silent after a token rotation", "red"),
        (COOLANT_SUPPLY, "Rack coolant supply too warm", "orange"),
        (COOLANT_FLOW, "Rack coolant flow low", "red"),
        (CDU_LOAD, "CDU over 90 % of its capacity", "orange"),
        (FEED_HEADROOM, "Feed headroom low", "orange"),
        (MODEL_DRIFT, "Facility reading departs from the model", "orange"),
        (CDU_LEAK, "CDU leak detected", "red"),
        (FEED_FAILED, "Power feed failed (units out of service)", "red"),
    ]


class SubjectLevelChoices(ChoiceSet):
    CARD = "card"
    RACK = "rack"
    SUPERNODE = "supernode"
    CLUSTER = "cluster"
    FACILITY = "facility"
    CHOICES = [(CARD, "Card", "blue"), (RACK, "Rack", "teal"),
               (SUPERNODE, "Supernode", "purple"), (CLUSTER, "Cluster", "indigo"),
               (FACILITY, "Facility (CDU, feed)", "cyan")]


class HealthChoices(ChoiceSet):
    """A card's derived health (``state.HEALTH_NAMES`` uses the same words)."""

    UNKNOWN = "unknown"
    OK = "ok"
    WARNING = "warning"
    CRITICAL = "critical"
    STALE = "stale"
    CHOICES = [(UNKNOWN, "Unknown (never reported)", "gray"), (OK, "OK", "green"),
               (WARNING, "Warning", "orange"), (CRITICAL, "Critical", "red"),
               (STALE, "Stale (silent)", "gray")]


class ScrapeStatusChoices(ChoiceSet):
    NEVER = "never"
    OK = "ok"
    PARTIAL = "partial"
    ERROR = "error"
    CHOICES = [(NEVER, "Never scraped", "gray"), (OK, "OK", "green"),
               (PARTIAL, "Partial (lines rejected)", "orange"), (ERROR, "Error", "red")]


class AlertStateChoices(ChoiceSet):
    """An alert as a receiver sees it (Alertmanager's words)."""

    FIRING = "firing"
    RESOLVED = "resolved"
    CHOICES = [(FIRING, "Firing", "red"), (RESOLVED, "Resolved", "green")]
