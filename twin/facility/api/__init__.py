"""REST API of the facility: sites, power and cooling elements, racks' places, and
each site's plant (loads and headroom of every element from the nameplate draw)."""
