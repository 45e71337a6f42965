"""Maps: self-contained HTML pages (Leaflet vendored) for each user."""

MAP_DETAILS = frozenset(
    {
        "thresholds",
        "driven_m",
        "reference_m",
        "ratio",
        "driven_line",
        "reference_line",
        "n_vehicles",
        "n_days",
        "n_stops",
        "implied_speed_kmh",
        "distance_m",
        "dt_s",
        "gap_s",
        "distance_to_boundary_m",
    }
)
"""The ``details`` keys the findings map reads (:mod:`maps.findings`: the popup's summary and
the ``longer_route`` lines); ``tests/engines/test_all_kinds.py`` checks the map is the same
with these alone, on every kind."""
