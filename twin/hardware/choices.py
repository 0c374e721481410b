"""Choice sets of the hardware model, with colours the admin and UI reuse."""
from twin.core.choices import ChoiceSet

__all__ = [
    "CardStatusChoices",
    "SelfHealingChoices",
    "CoolingChoices",
    "DeviceKindChoices",
    "DeviceStatusChoices",
    "FabricChoices",
    "LinkKindChoices",
    "LinkStatusChoices",
]


class FabricChoices(ChoiceSet):
    TORUS_3D = "torus3d"
    TORUS_2D = "torus2d"
    RING = "ring"
    PCIE_STAR = "pcie_star"
    FULL_MESH = "full_mesh"
    FAT_TREE = "fat_tree"
    CHOICES = [
        (TORUS_3D, "3D torus", "blue"),
        (TORUS_2D, "2D torus", "cyan"),
        (RING, "Ring", "teal"),
        (PCIE_STAR, "PCIe-switch star", "orange"),
        (FULL_MESH, "Full mesh", "purple"),
        (FAT_TREE, "Fat tree", "green"),
    ]


class CoolingChoices(ChoiceSet):
    LIQUID = "liquid"
    AIR = "air"
    CHOICES = [(LIQUID, "Liquid", "blue"), (AIR, "Air", "gray")]


class CardStatusChoices(ChoiceSet):
    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"
    MAINTENANCE = "maintenance"
    CHOICES = [
        (OK, "OK", "green"),
        (DEGRADED, "Degraded", "orange"),
        (FAILED, "Failed", "red"),
        (MAINTENANCE, "Maintenance", "gray"),
    ]


class SelfHealingChoices(ChoiceSet):
    """What the twin does when live telemetry shows a card failed (``twin.jobs.healing``):
    only propose a remediation for an operator to apply, or apply it at once."""

    PROPOSE = "propose"
    APPLY = "apply"
    CHOICES = [(PROPOSE, "Propose only", "orange"), (APPLY, "Apply automatically", "green")]


class DeviceKindChoices(ChoiceSet):
    PCIE_SWITCH = "pcie_switch"
    SMART_NIC = "smart_nic"
    LEAF = "leaf"
    SPINE = "spine"
    CORE = "core"
    STORAGE = "storage"
    CHOICES = [
        (PCIE_SWITCH, "PCIe switch", "orange"),
        (SMART_NIC, "Smart NIC", "purple"),
        (LEAF, "Leaf switch", "teal"),
        (SPINE, "Spine switch", "blue"),
        (CORE, "Core switch", "indigo"),
        (STORAGE, "File system appliance", "gray"),
    ]


class LinkKindChoices(ChoiceSet):
    SCALE_UP = "scale_up"
    PCIE = "pcie"
    INFINIBAND = "infiniband"
    ROCE = "roce"
    CHOICES = [
        (SCALE_UP, "Scale-up fabric", "blue"),
        (PCIE, "PCIe", "orange"),
        (INFINIBAND, "InfiniBand", "green"),
        (ROCE, "RoCE", "purple"),
    ]


class LinkStatusChoices(ChoiceSet):
    UP = "up"
    DEGRADED = "degraded"
    DOWN = "down"
    CHOICES = [(UP, "Up", "green"), (DEGRADED, "Degraded", "orange"), (DOWN, "Down", "red")]



class DeviceStatusChoices(ChoiceSet):
    """A network device's state as operators record it (a what-if forks the devices
    ``failed`` or in ``maintenance``: a switch down cuts off the servers it carries)."""

    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"
    MAINTENANCE = "maintenance"
    CHOICES = [(OK, "OK", "green"), (DEGRADED, "Degraded", "orange"), (FAILED, "Failed", "red"),
               (MAINTENANCE, "Maintenance", "gray")]
