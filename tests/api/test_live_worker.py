"""The live worker's claims: bounded, each vehicle's fixes in time order, every fix once."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Engine, text

from api.live_worker import process_queue
from api.settings import Settings

T0 = dt.datetime(2024, 3, 4, 12, tzinfo=dt.UTC)


def _last_seen(engine: Engine) -> dict[str, dt.datetime]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT vehicle_id, last_ts FROM live_detector_states "
                "WHERE detector = 'tracking_gap'"
            )
        ).all()
    return {str(v): ts for v, ts in rows}


class TestProcessQueue:
    def test_a_backlog_drains_in_bounded_claims_in_time_order(self, own_engine: Engine) -> None:
        """Three vehicles' 12 queued fixes go 5 a claim; a vehicle's oldest fixes go first."""
        # V1's fixes are queued newest first: the claim still takes them by time.
        queued = [("V1", 3 - k) for k in range(4)] + [
            (v, k) for v in ("V2", "V3") for k in range(4)
        ]
        with own_engine.begin() as conn:
            for vehicle, minute in queued:
                conn.execute(
                    text(
                        "INSERT INTO live_queue (vehicle_id, ts, lat, lon, meter, speed_flag) "
                        "VALUES (:v, :ts, -30.03, -51.22, 'free', false)"
                    ),
                    {"v": vehicle, "ts": T0 + dt.timedelta(minutes=minute)},
                )
        settings = Settings()
        assert process_queue(own_engine, settings=settings, max_fixes=5) == 5
        assert _last_seen(own_engine) == {"V1": T0 + dt.timedelta(minutes=3), "V2": T0}
        taken = []
        while done := process_queue(own_engine, settings=settings, max_fixes=5):
            taken.append(done)
        assert taken == [5, 2]
        last = T0 + dt.timedelta(minutes=3)
        assert _last_seen(own_engine) == {"V1": last, "V2": last, "V3": last}
        with own_engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM live_queue")).scalar_one() == 0
