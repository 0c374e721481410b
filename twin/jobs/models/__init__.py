"""Models of the jobs on the twin: submitted jobs, the cards they hold, uploaded traces,
and the remediations of failed cards (self-healing)."""
from twin.jobs.models.jobs import Allocation, Job
from twin.jobs.models.remediation import Remediation
from twin.jobs.models.traces import Trace

__all__ = ["Allocation", "Job", "Remediation", "Trace"]
