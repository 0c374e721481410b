"""Rack packing by nameplate power: how many servers (or switches) fit a rack.

Capacity planning in data centres sizes racks by *nameplate* (maximum rated)
power, not by measured average draw: a rack's breakers and cooling must hold
the worst case, when every accelerator runs at its TDP at once. So a
server's draw is

    server_w = cards × card_tdp_w + overhead_w + devices_w

(overhead: CPUs, memory, fans, drives; devices: the PCIe switches and NICs
modelled per server), and a rack of budget ``B`` with a fixed rack overhead
``o`` (PDU losses, a management switch, a CDU pump; 0 if not modelled) and
``m`` physical server slots holds

    per_rack = min(m, ⌊(B − o) / server_w⌋)

servers. ``n`` servers then need ``⌈n / per_rack⌉`` racks when racks are
filled in order, and the fullest rack draws ``o + min(n, per_rack) × server_w``.

Why it matters here: the seeds put a 512-card supernode "in" 40 kW racks, but
512 × 700 W (H100 SXM5 TDP) ≈ 358 kW of accelerators alone, nine times one
rack's budget. With 8-card servers of 1.8 kW overhead plus two PCIe switches
and two 400G smart NICs (≈ 7.8 kW per server), only 5 servers (40 cards) fit
a 40 kW rack, so the supernode spans ⌈64 / 5⌉ = 13 racks.

References:
    - The seeds (docs/roadmap.md): 40 kW per rack, liquid cooling, PUE ≤ 1.05; 512-card
      supernode of H100 SXM5 (700 W TDP, NVIDIA H100 datasheet).
    - Nameplate-power capacity planning: size each rack for the sum of its
      equipment's rated maximum draw (as in data-centre power planning
      practice, e.g. NVIDIA DGX SuperPOD reference architecture sizing racks
      by the DGX H100's 10.2 kW maximum system power).

Example:
    >>> server = ServerDraw(cards=8, card_w=700, overhead_w=1800, devices_w=380)
    >>> plan = pack_servers(64, server, rack_budget_w=40_000)
    >>> (plan.per_rack, plan.racks, plan.fullest_rack_w)
    (5, 13, 38900)
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DEFAULT_RACK_BUDGET_W",
    "RackBudgetError",
    "RackPacking",
    "ServerDraw",
    "max_cards_per_server",
    "pack",
    "pack_servers",
    "racks_needed",
    "servers_per_rack",
]

DEFAULT_RACK_BUDGET_W = 40_000
"""The seeds' rack budget: 40 kW per (liquid-cooled) rack."""


class RackBudgetError(ValueError):
    """Not even one item fits a rack: the message says why and what would fit.

    Attributes:
        item_w: draw of one server (or device) in watts.
        available_w: what a rack offers to items: budget − rack overhead.
        min_budget_w: the smallest rack budget that holds one item.
        max_cards: for servers, the most cards per server that would fit the
            current budget (``None`` for devices, or when even a server
            without cards does not fit).
    """

    def __init__(
        self,
        message: str,
        *,
        item_w: int,
        available_w: int,
        min_budget_w: int,
        max_cards: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.item_w = item_w
        self.available_w = available_w
        self.min_budget_w = min_budget_w
        self.max_cards = max_cards


@dataclass(frozen=True)
class ServerDraw:
    """Nameplate draw of one server, term by term.

    Attributes:
        cards: accelerator cards in the server.
        card_w: TDP of one card (W).
        overhead_w: CPUs, memory, fans, drives (W).
        devices_w: per-server network devices: PCIe switches, NICs (W).
    """

    cards: int
    card_w: int
    overhead_w: int
    devices_w: int = 0

    def __post_init__(self) -> None:
        for name in ("cards", "card_w", "overhead_w", "devices_w"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")

    @property
    def total_w(self) -> int:
        """cards × card_w + overhead_w + devices_w."""
        return self.cards * self.card_w + self.overhead_w + self.devices_w

    @property
    def fixed_w(self) -> int:
        """The draw that does not scale with the card count."""
        return self.overhead_w + self.devices_w


@dataclass(frozen=True)
class RackPacking:
    """How ``items`` servers (or devices) of ``item_w`` each fill racks in order.

    Racks are filled in order: rack ``r`` holds items ``r × per_rack`` up to
    ``(r + 1) × per_rack − 1``; only the last rack may be partly filled.
    """

    items: int
    item_w: int
    per_rack: int
    racks: int
    rack_budget_w: int
    rack_overhead_w: int
    limited_by: str
    """``"power"`` when the budget caps ``per_rack``, ``"slots"`` when the
    physical slot count does."""

    @property
    def fullest_rack_w(self) -> int:
        """Draw of the fullest rack: o + min(n, per_rack) × item_w (0 if empty)."""
        if self.items == 0:
            return 0
        return self.rack_overhead_w + min(self.items, self.per_rack) * self.item_w

    @property
    def last_rack_items(self) -> int:
        """Items in the last rack (``per_rack`` when all racks are full)."""
        if self.items == 0:
            return 0
        rest = self.items % self.per_rack
        return rest or self.per_rack

    @property
    def total_w(self) -> int:
        """Draw of all racks together: n × item_w + racks × o."""
        return self.items * self.item_w + self.racks * self.rack_overhead_w

    def rack_of(self, item: int) -> int:
        """Index of the rack that holds item ``item`` (0-based)."""
        if not 0 <= item < self.items:
            raise IndexError(f"item {item} outside 0–{self.items - 1}")
        return item // self.per_rack

    def items_in_rack(self, rack: int) -> int:
        if not 0 <= rack < self.racks:
            raise IndexError(f"rack {rack} outside 0–{self.racks - 1}")
        return self.last_rack_items if rack == self.racks - 1 else self.per_rack

    def rack_draw_w(self, rack: int) -> int:
        """Draw of rack ``rack``: o + items in it × item_w."""
        return self.rack_overhead_w + self.items_in_rack(rack) * self.item_w


def _check_budget(rack_budget_w: int, rack_overhead_w: int,
                  max_per_rack: int | None) -> None:
    if rack_budget_w <= 0:
        raise RackBudgetError(
            f"A rack budget must be positive, not {rack_budget_w:,} W "
            f"(the seeds' racks hold {DEFAULT_RACK_BUDGET_W:,} W).",
            item_w=0, available_w=rack_budget_w - rack_overhead_w,
            min_budget_w=rack_overhead_w + 1,
        )
    if rack_overhead_w < 0:
        raise ValueError("rack_overhead_w must not be negative")
    if max_per_rack is not None and max_per_rack < 1:
        raise ValueError("max_per_rack must be at least 1")


def servers_per_rack(
    server_w: int,
    rack_budget_w: int = DEFAULT_RACK_BUDGET_W,
    *,
    rack_overhead_w: int = 0,
    max_per_rack: int | None = None,
) -> int:
    """How many items of ``server_w`` fit one rack: min(m, ⌊(B − o) / w⌋).

    Returns 0 when not even one fits (``pack`` turns that into an error).

    >>> servers_per_rack(7_780, 40_000)
    5
    >>> servers_per_rack(7_780, 40_000, max_per_rack=4)
    4
    """
    _check_budget(rack_budget_w, rack_overhead_w, max_per_rack)
    if server_w <= 0:
        raise ValueError("an item's draw must be positive")
    fit = max(rack_budget_w - rack_overhead_w, 0) // server_w
    if max_per_rack is not None:
        fit = min(fit, max_per_rack)
    return int(fit)


def racks_needed(items: int, per_rack: int) -> int:
    """⌈items / per_rack⌉ racks when racks are filled in order.

    >>> racks_needed(64, 5)
    13
    """
    if items < 0:
        raise ValueError("items must not be negative")
    if per_rack < 1:
        raise ValueError("per_rack must be at least 1")
    return -(-items // per_rack)


def max_cards_per_server(
    server: ServerDraw,
    rack_budget_w: int = DEFAULT_RACK_BUDGET_W,
    *,
    rack_overhead_w: int = 0,
) -> int | None:
    """Most cards a server of this kind may carry so that one fits a rack.

    ⌊(B − o − fixed) / card_w⌋, or ``None`` if the server without cards
    already exceeds the budget.

    >>> max_cards_per_server(ServerDraw(8, 700, 1800, 380), 5_000)
    4
    """
    spare = rack_budget_w - rack_overhead_w - server.fixed_w
    if spare < 0:
        return None
    if server.card_w == 0:
        return server.cards
    return spare // server.card_w


def pack(
    items: int,
    item_w: int,
    rack_budget_w: int = DEFAULT_RACK_BUDGET_W,
    *,
    rack_overhead_w: int = 0,
    max_per_rack: int | None = None,
    what: str = "item",
) -> RackPacking:
    """Pack ``items`` of ``item_w`` watts each into racks of ``rack_budget_w``.

    Raises:
        RackBudgetError: one item alone exceeds what a rack offers; the
            message names the draw, the budget and the minimum budget.

    >>> p = pack(10_240, 2_000, 40_000, max_per_rack=16, what="switch")
    >>> (p.per_rack, p.racks, p.limited_by)
    (16, 640, 'slots')
    """
    if items < 0:
        raise ValueError("items must not be negative")
    per_rack = servers_per_rack(item_w, rack_budget_w, rack_overhead_w=rack_overhead_w,
                                max_per_rack=max_per_rack)
    if per_rack == 0:
        available = rack_budget_w - rack_overhead_w
        raise RackBudgetError(
            f"One {what} draws {item_w:,} W but a rack offers {max(available, 0):,} W "
            f"(budget {rack_budget_w:,} W − {rack_overhead_w:,} W rack overhead): "
            f"raise the rack budget to at least {item_w + rack_overhead_w:,} W.",
            item_w=item_w, available_w=available, min_budget_w=item_w + rack_overhead_w,
        )
    by_power = (rack_budget_w - rack_overhead_w) // item_w
    limited_by = "slots" if max_per_rack is not None and max_per_rack < by_power else "power"
    return RackPacking(
        items=items, item_w=item_w, per_rack=per_rack, racks=racks_needed(items, per_rack),
        rack_budget_w=rack_budget_w, rack_overhead_w=rack_overhead_w, limited_by=limited_by,
    )


def pack_servers(
    servers: int,
    server: ServerDraw,
    rack_budget_w: int = DEFAULT_RACK_BUDGET_W,
    *,
    rack_overhead_w: int = 0,
    max_per_rack: int | None = None,
) -> RackPacking:
    """Pack ``servers`` identical servers into racks; see the module docstring.

    Raises:
        RackBudgetError: even one server exceeds the rack budget. The message
            gives the server's draw term by term and what *would* fit: the
            most cards per server within this budget, or the minimum budget.

    >>> pack_servers(64, ServerDraw(8, 700, 1800, 380)).racks
    13
    """
    _check_budget(rack_budget_w, rack_overhead_w, max_per_rack)
    total = server.total_w
    available = rack_budget_w - rack_overhead_w
    if total > available:
        fits = max_cards_per_server(server, rack_budget_w, rack_overhead_w=rack_overhead_w)
        terms = (f"{server.cards} × {server.card_w:,} W cards + {server.overhead_w:,} W "
                 f"overhead + {server.devices_w:,} W network devices")
        if fits is None or fits == 0:
            would = ("even a server without cards does not fit" if fits is None
                     else "not even one card per server fits")
        else:
            would = (f"at most {fits} card{'s' if fits != 1 else ''} per server would fit "
                     f"({fits * server.card_w + server.fixed_w:,} W)")
        over = f" − {rack_overhead_w:,} W rack overhead" if rack_overhead_w else ""
        raise RackBudgetError(
            f"One server draws {total:,} W ({terms}), more than the rack budget of "
            f"{rack_budget_w:,} W{over}: {would}; raise the rack budget to at least "
            f"{total + rack_overhead_w:,} W.",
            item_w=total, available_w=available, min_budget_w=total + rack_overhead_w,
            max_cards=fits,
        )
    return pack(servers, total, rack_budget_w, rack_overhead_w=rack_overhead_w,
                max_per_rack=max_per_rack, what="server")
