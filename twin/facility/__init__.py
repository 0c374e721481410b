"""The physical twin's plant as rows: a site per cluster, its power chain and cooling
chain as element rows (a kind, a parent, ratings), and each rack's place in both.

``plant.plant_for_cluster`` turns the rows into ``simulation.facility.plant.Plant``
(the data the facility engine reads); ``capacity`` holds the rating rule every write
keeps; ``builder`` sizes a sensible facility for a built cluster.
"""
