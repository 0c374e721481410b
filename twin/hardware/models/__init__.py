"""The hardware model, one module per domain (after NetBox's ``dcim/models``)."""
from twin.hardware.models.builds import *  # noqa: F403
from twin.hardware.models.cards import *  # noqa: F403
from twin.hardware.models.catalogue import *  # noqa: F403
from twin.hardware.models.clusters import *  # noqa: F403
from twin.hardware.models.grants import *  # noqa: F403
from twin.hardware.models.links import *  # noqa: F403
from twin.hardware.models.network import *  # noqa: F403
from twin.hardware.models.racks import *  # noqa: F403
from twin.hardware.models.servers import *  # noqa: F403
from twin.hardware.models.tokens import *  # noqa: F403
