"""Evidence fixes named without their meter (a boarding's, at a stand) read it from the stored
fixes of that instant."""

from __future__ import annotations

from factories import make_pings

from db.enforcement.evidence import with_stored_meters
from db.tracking.store import copy_fixes


def test_a_boarding_s_fixes_show_the_stored_meter(db_session) -> None:
    """Free, free, occupied at the stand: the evidence names the instants only; the stored
    fixes of the vehicle give each its meter. A fix retention dropped, another vehicle's fix
    of that instant, or one the finding gave a meter, is left as it is."""
    rows = [
        ("EVM-1", "2024-03-07T22:21:56Z", -30.0, -51.19, "free"),
        ("EVM-1", "2024-03-07T22:27:54Z", -30.0, -51.19, "free"),
        ("EVM-1", "2024-03-07T22:28:11Z", -30.0, -51.19, "occupied"),
        ("EVM-2", "2024-03-07T22:29:13Z", -30.0, -51.19, "occupied"),
    ]
    copy_fixes(db_session.connection(), make_pings(rows), source="test")
    fixes = [
        {"timestamp": t, "lat": -30.0, "lon": -51.19, "row": k}
        for k, t in enumerate(
            [
                "2024-03-07T22:21:56Z",
                "2024-03-07T22:27:54Z",
                "2024-03-07T22:28:11Z",
                "2024-03-07T22:29:13Z",  # EVM-2's instant: not this vehicle's fix
                "2024-03-07T22:40:00Z",  # not stored
            ]
        )
    ]
    fixes.append({"timestamp": "2024-03-07T22:21:56Z", "lat": -30.0, "lon": -51.19, "meter": "off"})
    (record,) = with_stored_meters(
        db_session, [{"vehicle_id": "EVM-1", "details": {"fixes": fixes}}]
    )
    assert [f.get("meter") for f in record["details"]["fixes"]] == [
        "free",
        "free",
        "occupied",
        None,
        None,
        "off",
    ]
