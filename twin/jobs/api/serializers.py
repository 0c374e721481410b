"""Serializers of the jobs on the twin.

A job is submitted with :class:`JobSerializer` (a ``ValidatedModelSerializer``:
the model's ``clean()`` answers 400 per field) plus ``policy``; what the
placement decided (state, message, placement quality, allocations) is read-only.
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from twin.core.api.serializers import ValidatedModelSerializer
from twin.jobs.choices import TraceFormatChoices
from twin.jobs.models import Allocation, Job, Remediation, Trace

__all__ = ["AllocationSerializer", "CheckpointSerializer", "ClusterAllocationsSerializer",
           "JobSerializer",
           "PlacementSerializer", "RemediationDecisionSerializer", "RemediationSerializer",
           "TraceSerializer", "TraceUploadSerializer", "policy_names"]


def policy_names() -> list[str]:
    from simulation.scheduling import POLICIES

    return sorted(POLICIES)


class PlacementSerializer(serializers.Serializer):
    """How good a running job's placement is (``twin.jobs.quality``); {} until placed."""

    cards = serializers.IntegerField()
    servers = serializers.IntegerField()
    racks = serializers.IntegerField()
    supernodes = serializers.IntegerField()
    rail_aligned = serializers.BooleanField(
        help_text="More than one server, each holding the same card slots (same rails).")
    single_server = serializers.BooleanField()
    allreduce_s = serializers.FloatField(allow_null=True,
                                         help_text="Predicted AllReduce time on these cards.")
    allreduce_algorithm = serializers.CharField(allow_null=True)
    allreduce_bytes = serializers.IntegerField(allow_null=True)
    compact_allreduce_s = serializers.FloatField(
        allow_null=True, help_text="The same on as many cards placed compactly.")
    vs_compact = serializers.FloatField(allow_null=True,
                                        help_text="allreduce_s / compact_allreduce_s.")
    allreduce_note = serializers.CharField(help_text="Why there is no prediction, if none.")


class JobSerializer(ValidatedModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:job-detail")
    policy = serializers.ChoiceField(
        choices=policy_names(), required=False, allow_blank=True,
        help_text="Placement policy (simulation.scheduling.POLICIES); default "
                  "topology-aware (TWIN_JOBS_POLICY).")
    submitted_by = serializers.SlugRelatedField(slug_field="username", read_only=True,
                                                allow_null=True)
    placement = serializers.SerializerMethodField()
    cards_held = serializers.SerializerMethodField(help_text="Ids of the cards it holds.")

    class Meta:
        model = Job
        fields = [
            "id", "url", "display", "cluster", "name", "tenant", "cards", "share_milli",
            "accelerator", "qos", "priority", "gang", "duration_s", "policy", "state",
            "message", "placement", "cards_held", "submitted_by", "started", "finished",
            "checkpoint_interval_s", "last_checkpoint_at", "model_params",
            "training_model", "global_batch", "created", "last_updated",
        ]
        read_only_fields = ["state", "message", "started", "finished"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["policy"].error_messages["invalid_choice"] = (
            f"unknown policy '{{input}}' (choose from {', '.join(policy_names())})")

    @extend_schema_field(PlacementSerializer(allow_null=True))
    def get_placement(self, job: Job) -> dict[str, Any] | None:
        return job.placement or None

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_cards_held(self, job: Job) -> list[int]:
        cached = getattr(job, "_prefetched_objects_cache", {}).get("allocations")
        if cached is not None:
            return [a.card_id for a in cached]
        return list(Allocation.objects.filter(job=job).values_list("card_id", flat=True))


class AllocationSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:allocation-detail")
    tenant = serializers.CharField(source="job.tenant", read_only=True)
    server = serializers.IntegerField(source="card.server_id", read_only=True)

    class Meta:
        model = Allocation
        fields = ["id", "url", "job", "tenant", "card", "server", "share_milli", "vf_index",
                  "created"]
        read_only_fields = fields


class ClusterAllocationsSerializer(serializers.Serializer):
    """A cluster's allocations as parallel arrays (the dashboard colours cards with them)."""

    cluster = serializers.IntegerField()
    card = serializers.ListField(child=serializers.IntegerField())
    job = serializers.ListField(child=serializers.IntegerField())
    share_milli = serializers.ListField(child=serializers.IntegerField())
    vf_index = serializers.ListField(child=serializers.IntegerField())
    jobs = serializers.ListField(child=serializers.DictField(), help_text=(
        "The running jobs: id, name, tenant, cards, share_milli, placement."))
    tenants = serializers.ListField(child=serializers.CharField(),
                                    help_text="Tenants of the running jobs, sorted.")


class TraceSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:trace-detail")
    uploaded_by = serializers.SlugRelatedField(slug_field="username", read_only=True,
                                               allow_null=True)

    class Meta:
        model = Trace
        fields = ["id", "url", "name", "format", "node_count", "gpu_count", "job_count",
                  "size_bytes", "sha256", "uploaded_by", "created"]
        read_only_fields = fields


class TraceUploadSerializer(serializers.Serializer):
    """``multipart/form-data``: a name, the format, the job file and (optional) node list."""

    name = serializers.CharField(max_length=100)
    format = serializers.ChoiceField(choices=TraceFormatChoices.choices())
    jobs = serializers.FileField(help_text="Pods (Alibaba), cluster_log.csv (Helios) or "
                                           "cluster_job_log (Philly).")
    nodes = serializers.FileField(required=False, help_text="The node list (Alibaba's "
                                                            "node CSV); optional.")


class RemediationSerializer(serializers.ModelSerializer):
    """A remediation of a failed card: cause, proposal (per job: action, spare, restart
    point, expected lost work), state and who decided it. Read-only."""

    url = serializers.HyperlinkedIdentityField(view_name="api:remediation-detail")
    applied_by = serializers.SlugRelatedField(slug_field="username", read_only=True,
                                              allow_null=True)
    jobs = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = Remediation
        fields = ["id", "url", "cluster", "card", "cause", "detail", "episode", "jobs",
                  "proposal", "state", "message", "detected_at", "reading_at", "decided_at",
                  "applied_by", "applied_via", "created", "last_updated"]
        read_only_fields = fields


class RemediationDecisionSerializer(serializers.Serializer):
    """The body of ``…/reject/`` (optional): why."""

    reason = serializers.CharField(required=False, allow_blank=True, max_length=200)


class CheckpointSerializer(serializers.Serializer):
    """``{"at": "<ISO time>"}`` (optional: now) — when the job's checkpoint finished."""

    at = serializers.DateTimeField(required=False)

    def validate_at(self, value: Any) -> Any:
        from django.utils import timezone

        if value > timezone.now():
            raise serializers.ValidationError("A checkpoint cannot finish in the future.")
        return value
