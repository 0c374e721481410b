"""Models of the jobs on the twin: submitted jobs, the cards they hold, uploaded traces."""
from twin.jobs.models.jobs import Allocation, Job
from twin.jobs.models.traces import Trace

__all__ = ["Allocation", "Job", "Trace"]
