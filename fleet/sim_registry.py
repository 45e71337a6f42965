"""Synthetic registry of the simulated fleet: drivers, their links to prefixos, vehicle documents.

Part of the independent simulator (:mod:`fleet.simulation`); written from the file contract
(docs/formatos.md: drivers, driver links, the fleet's document columns) and the laws, not from
the detectors' code. EVERY PERSON HERE IS FICTITIOUS: ids ``SINT-C0001``, names "Condutor
Fictício 0001", CNH numbers ``SINT0000001`` (no real CNH has letters), ``synthetic = sim`` on
every row of the drivers file; the ``PROVENANCE.md`` written beside the files says so.

Roster
    Every prefixo has a titular (autorizatário condutor) linked since the vehicle's first alvará
    and 0–2 auxiliares. On a working day the titular drives alone, an auxiliar drives alone, or
    the titular drives until lunch and hands the vehicle to an auxiliar at the first fix after
    lunch with the meter not ``occupied`` (so no trip has two drivers). Every fix carries the
    ``driver_id`` of who drives.

Episodes (positives of ``driver_not_allowed``, one truth row per vehicle, day and driver with
service; ``lookalike`` is the reason) on day-shift vehicles that are not barred:

- ``cnh_suspended`` — a titular drives during a CNH suspensa period (POA art. 60 IV);
- ``ictp_suspended`` — an auxiliar drives after lunch during an ICTP suspensa period (60 IV);
- ``ictp_expired`` — a titular drives over :data:`ICTP_EXTENSION_DAYS` after the ICTP's
  ``valid_until`` (POA art. 57 V with art. 5º § 2º);
- ``cnh_expired`` — a titular drives after the CNH's ``valid_until`` (a finding; Porto Alegre's
  decree types no infraction for it: no POA proposal);
- ``not_registered`` — after lunch a driver absent from the drivers file drives (art. 59 IV);
- ``not_linked`` — the auxiliar of another prefixo drives after lunch (art. 58 VI);
- none for ``too_many_auxiliaries``: Porto Alegre's decree sets no cap on auxiliares, so the
  third auxiliar below is a look-alike.

Look-alikes (negatives, :data:`DRIVER_LOOKALIKES`): every stint of a linked driver with valid
documents; the suspended driver's days outside the period; the ICTP's last valid day and the
30 days after it; the CNH's last valid day; a driver linked that very day; an ICTP renewed
late, valid at the instant; a third auxiliar, linked mid-period, who drives after lunch (lawful
in Porto Alegre), and the first two while it is linked; a titular whose
id the tracker writes its own way (lower case, no leading zeros: a coding difference, not an
unregistered driver).

Vehicle documents (fleet columns ``year``, ``first_registered_on``, ``alvara_first_issued_on``,
``last_inspection_on``): realistic dates that bar nothing, except ``inspection_overdue`` for one
vehicle whose last vistoria is more than :data:`MAX_INSPECTION_AGE_DAYS` old from mid-period
(POA art. 57 XIV with 33 § 6º); look-alikes: that vehicle's last lawful day, a vistoria done late
but before the service (the registry keeps only the latest), an alvará issued on the first day of
service. :data:`MAX_INSPECTION_AGE_DAYS` is a parameter of the simulation, not POA's legal period
(Lei 11.582/2014, outside the texts): it is written to ``thresholds.toml``.

Randomness comes from its own stream (``[seed, 24]``): the fixes, rides and the other truth rows
of a seed are those of the simulator without the registry.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from fleet.simulation import Sim, Vehicle

MAX_INSPECTION_AGE_DAYS = 365
"""Days a vistoria counts in the simulation (``max_inspection_age_days`` of the run)."""
SYNTHETIC_FLAG = "sim"
ICTP_EXTENSION_DAYS = 30
"""POA decree art. 5º § 2º: "Fica prorrogado em 30 (trinta) dias o prazo de validade da ICTP"."""
UNREGISTERED_ID = "SINT-C9001"
DRIVER_KIND = "driver_not_allowed"
DRIVER_LOOKALIKES = {
    "linked_driver": "a driver linked to the prefixo that day, with valid CNH and ICTP",
    "outside_suspension": "the driver of a CNH/ICTP suspension drives before or after its period",
    "ictp_within_extension": "service on the ICTP's last valid day or within the 30 days POA's "
    "decree extends it for the renewal (art. 5º § 2º)",
    "cnh_validity_day": "service on the CNH's last valid day",
    "registered_same_day": "an auxiliar linked to the prefixo that very day drives after lunch",
    "renewed_late_valid": "an ICTP renewed late, valid at the instant of the service",
    "within_auxiliary_cap": "one of the first two auxiliares drives while a third is linked",
    "third_auxiliary": "a third auxiliar, linked mid-period, drives after lunch (Porto Alegre's "
    "decree sets no cap)",
    "id_written_otherwise": "the tracker writes the titular's id its own way ('sint-c1' for "
    "'SINT-C0001')",
}
VEHICLE_LOOKALIKES = {
    "inspection_last_lawful_day": f"service on the day the last vistoria is exactly "
    f"{MAX_INSPECTION_AGE_DAYS} days old",
    "inspection_renewed_late": "vistoria done late, on or before the day of the service",
    "alvara_issued_same_day": "service on the day of the vehicle's first alvará",
}
_EPISODE_ROLES = {
    "plain",
    "accessible",
    "home_outside",
    "partial_presence",
    "short_absence",
    "roamer",
    "long_vacation",
}


@dataclasses.dataclass
class Driver:
    """A fictitious driver and the status periods of their documents."""

    driver_id: str
    name: str
    cnh_number: str
    cnh_category: str
    cnh_valid_until: dt.date
    ictp_valid_until: dt.date
    periods: list[tuple[str, str, dt.date | None, dt.date | None]] = dataclasses.field(
        default_factory=list
    )  # (document, status, since, until)
    note: str = ""


@dataclasses.dataclass
class Link:
    """A driver's link to a prefixo (inclusive dates; no end: open)."""

    vehicle: Vehicle
    driver_id: str
    role: str
    valid_from: dt.date
    valid_until: dt.date | None = None


@dataclasses.dataclass
class Registry:
    """The synthetic registry of a run."""

    drivers: list[Driver] = dataclasses.field(default_factory=list)
    links: list[Link] = dataclasses.field(default_factory=list)
    # (vehicle_id, day) -> [(t_from, driver_id, tag)]: tag names the case of that stint
    plan: dict[tuple[str, int], list[tuple[float, str, str]]] = dataclasses.field(
        default_factory=dict
    )


class _Builder:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.rng = np.random.default_rng([sim.seed, 24])
        self.reg = Registry()
        self.by_id: dict[str, Driver] = {}
        self.titular: dict[str, str] = {}
        self.aux: dict[str, list[str]] = {}

    def date(self, d: int) -> dt.date:
        return self.sim.day0 + dt.timedelta(days=int(d))

    def new_driver(self, *, ictp_valid_until: dt.date | None = None) -> Driver:
        n = len(self.reg.drivers) + 1
        r = self.rng
        end = self.date(self.sim.days)
        drv = Driver(
            driver_id=f"SINT-C{n:04d}",
            name=f"Condutor Fictício {n:04d}",
            cnh_number=f"SINT{n:07d}",
            cnh_category=str(r.choice(["B", "AB", "B", "AB", "D"])),
            cnh_valid_until=end + dt.timedelta(days=int(r.integers(120, 1800))),
            ictp_valid_until=ictp_valid_until or end + dt.timedelta(days=int(r.integers(30, 700))),
        )
        self.reg.drivers.append(drv)
        self.by_id[drv.driver_id] = drv
        return drv

    def link(self, v: Vehicle, driver: Driver, role: str, start: dt.date) -> None:
        self.reg.links.append(Link(v, driver.driver_id, role, start))
        if role == "titular":
            self.titular[v.vid] = driver.driver_id
        else:
            self.aux.setdefault(v.vid, []).append(driver.driver_id)

    # ------------------------------------------------------------------ vehicle documents

    def documents(self) -> None:
        sim, r = self.sim, self.rng
        n = sim.days
        for v in sim.vehicles:
            year = int(r.integers(2015, 2023))
            reg = dt.date(year, int(r.integers(1, 13)), int(r.integers(1, 29)))
            v.year = year
            v.first_registered_on = reg
            v.alvara_first_issued_on = reg + dt.timedelta(days=int(r.integers(10, 90)))
            lo, hi = n + 4 - MAX_INSPECTION_AGE_DAYS, -5
            v.last_inspection_on = self.date(int(r.integers(min(lo, hi), hi + 1)))
            if v.inspection_valid_until is not None:  # the selo expires a year after it
                v.last_inspection_on = v.inspection_valid_until - dt.timedelta(
                    days=MAX_INSPECTION_AGE_DAYS
                )

    # ------------------------------------------------------------------ roster and plan

    def roster(self) -> None:
        r = self.rng
        for v in self.sim.vehicles:
            assert v.alvara_first_issued_on is not None
            start = v.alvara_first_issued_on
            self.link(v, self.new_driver(), "titular", start)
            for _ in range(int(r.choice([0, 1, 1, 2]))):
                self.add_aux(v)

    def add_aux(self, v: Vehicle, start: dt.date | None = None) -> Driver:
        drv = self.new_driver()
        if start is None:
            first = next(k.valid_from for k in self.reg.links if k.vehicle is v)
            last = self.sim.day0 - dt.timedelta(days=1)
            span = max(0, (last - first).days)
            start = first + dt.timedelta(days=int(self.rng.integers(0, span + 1)))
        self.link(v, drv, "auxiliar", start)
        return drv

    def default_plan(self) -> None:
        r = self.rng
        for v in self.sim.vehicles:
            aux = self.aux.get(v.vid, [])
            for k, d in enumerate(sorted(v.windows)):
                t = self.titular[v.vid]
                if not aux:
                    self.reg.plan[(v.vid, d)] = [(-1.0, t, "linked_driver")]
                    continue
                u = r.random()
                a = aux[k % len(aux)]
                if u < 0.55:
                    stints = [(-1.0, t, "linked_driver")]
                elif u < 0.8:
                    stints = [(-1.0, a, "linked_driver")]
                else:
                    stints = [(-1.0, t, "linked_driver"), (0.0, a, "linked_driver")]
                self.reg.plan[(v.vid, d)] = stints


def _candidates(sim: Sim) -> list[Vehicle]:
    return [
        v
        for v in sim.vehicles
        if v.role in _EPISODE_ROLES
        and v.status == "active"
        and v.shift != "night"
        and len(v.windows) >= 2
    ]


def _pick(pool: list[Vehicle], days: range | list[int]) -> Vehicle | None:
    """Take from the pool the vehicle working most of ``days``."""
    if not pool:
        return None
    want = set(days)
    best = max(pool, key=lambda v: (len(want & set(v.windows)), len(v.windows)))
    pool.remove(best)
    return best


def _near(v: Vehicle, target: int, k: int = 1) -> list[int]:
    """``k`` working days of ``v`` closest to ``target`` (not the first day)."""
    days = sorted((d for d in v.windows if d >= 1), key=lambda d: (abs(d - target), d))
    return sorted(days[:k])


def _episodes(b: _Builder) -> dict[str, Any]:
    """Choose the episode vehicles and change their registry and plans; return what was done."""
    sim, plan = b.sim, b.reg.plan
    n = sim.days
    pool = _candidates(sim)
    done: dict[str, Any] = {}

    def drive(v: Vehicle, d: int, *who: tuple[str, str]) -> None:
        """Who drives ``v`` on day ``d``: one (driver, tag), or two (handover after lunch)."""
        plan[(v.vid, d)] = [(-1.0 + i, did, tag) for i, (did, tag) in enumerate(who)]

    ok = "linked_driver"
    # cnh_suspended: the titular drives every working day; CNH suspensa on [a, z]
    a = max(1, n // 3)
    z = min(n - 1, a + max(1, n // 8))
    v = _pick(pool, range(a, z + 1))
    if v is not None:
        t = b.by_id[b.titular[v.vid]]
        t.periods.append(("cnh", "suspensa", b.date(a), b.date(z)))
        for d in v.windows:
            drive(v, d, (t.driver_id, "cnh_suspended" if a <= d <= z else "outside_suspension"))
        done["cnh_suspended"] = v.vid
    # ictp_suspended: an auxiliar drives after lunch every working day; ICTP suspensa on [a, z]
    a = max(1, n // 2)
    z = min(n - 1, a + max(1, n // 8))
    v = _pick(pool, range(a, z + 1))
    if v is not None:
        aux = b.aux.get(v.vid) or [b.add_aux(v).driver_id]
        drv = b.by_id[aux[0]]
        drv.periods.append(("ictp", "suspensa", b.date(a), b.date(z)))
        for d in v.windows:
            tag = "ictp_suspended" if a <= d <= z else "outside_suspension"
            drive(v, d, (b.titular[v.vid], ok), (drv.driver_id, tag))
        done["ictp_suspended"] = v.vid
    # ictp_expired: the titular drives every working day; the ICTP's last day is c, extended by
    # ICTP_EXTENSION_DAYS (c may fall before the first day): expired on the last few days
    c = n - max(2, n // 10) - 1 - ICTP_EXTENSION_DAYS
    v = _pick(pool, range(max(0, c), n))
    if v is not None:
        t = b.by_id[b.titular[v.vid]]
        t.ictp_valid_until = b.date(c)
        for d in v.windows:
            late = d - c
            tag = (
                "ictp_expired"
                if late > ICTP_EXTENSION_DAYS
                else ("ictp_within_extension" if late >= 0 else ok)
            )
            drive(v, d, (t.driver_id, tag))
        done["ictp_expired"] = v.vid
    # cnh_expired: the titular drives every working day; the CNH's last day is c
    c = max(1, n - 2 - max(1, n // 16))
    v = _pick(pool, range(c, n))
    if v is not None:
        t = b.by_id[b.titular[v.vid]]
        t.cnh_valid_until = b.date(c)
        for d in v.windows:
            tag = "cnh_expired" if d > c else ("cnh_validity_day" if d == c else ok)
            drive(v, d, (t.driver_id, tag))
        done["cnh_expired"] = v.vid
    # not_registered: after lunch, on a few days, someone absent from the registry drives
    k = max(1, n // 20)
    v = _pick(pool, range(n // 2 - k, n // 2 + k + 1))
    if v is not None:
        for d in _near(v, n // 2, k):
            drive(v, d, (b.titular[v.vid], ok), (UNREGISTERED_ID, "not_registered"))
        done["not_registered"] = v.vid
    # not_linked: the auxiliar of vehicle p drives vehicle q after lunch
    p = _pick(pool, range(n))
    q = _pick(pool, range(n // 3, n // 3 + 2 * k + 1))
    if p is not None and q is not None:
        aux = b.aux.get(p.vid) or [b.add_aux(p).driver_id]
        for d in _near(q, n // 3 + k, k):
            drive(q, d, (b.titular[q.vid], ok), (aux[0], "not_linked"))
            if d in p.windows:
                drive(p, d, (b.titular[p.vid], ok))
        done["not_linked"] = (p.vid, q.vid)
    # third_auxiliary: a third auxiliar linked from day f drives after lunch (lawful in POA)
    f = max(1, n // 2)
    v = _pick(pool, range(f, n))
    if v is not None:
        while len(b.aux.get(v.vid, [])) < 2:
            b.add_aux(v)
        first_two = b.aux[v.vid][:2]
        third = b.add_aux(v, start=b.date(f))
        for i, d in enumerate(sorted(v.windows)):
            one = first_two[i % 2]
            if d >= f:
                drive(v, d, (one, "within_auxiliary_cap"), (third.driver_id, "third_auxiliary"))
            else:
                drive(v, d, (b.titular[v.vid], ok), (one, ok))
        done["third_auxiliary"] = v.vid
    # registered_same_day: an auxiliar linked on day g drives after lunch that day
    v = _pick(pool, range(n // 2, n // 2 + 1))
    if v is not None:
        g = _near(v, n // 2)[0]
        b.aux[v.vid] = b.aux.get(v.vid, [])[:1]
        b.reg.links = [
            k
            for k in b.reg.links
            if k.vehicle is not v or k.role == "titular" or k.driver_id in b.aux[v.vid]
        ]
        new = b.add_aux(v, start=b.date(g))
        for d in v.windows:
            if d < g:
                drive(v, d, (b.titular[v.vid], ok))
            else:
                tag = "registered_same_day" if d == g else ok
                drive(v, d, (b.titular[v.vid], ok), (new.driver_id, tag))
        done["registered_same_day"] = v.vid
    # renewed_late_valid: the titular's ICTP lapsed on days h-10..h-1 and was renewed on h;
    # an auxiliar drives during the lapse, the titular from h on
    h = max(1, n // 2)
    v = _pick(pool, range(h, n))
    if v is not None:
        t = b.by_id[b.titular[v.vid]]
        aux = b.aux.get(v.vid) or [b.add_aux(v).driver_id]
        t.ictp_valid_until = b.date(h) + dt.timedelta(days=5 * 365)
        t.note = (
            f"ICTP vencida de {b.date(h - 10)} a {b.date(h - 1)}, renovada em {b.date(h)} "
            "(o cadastro guarda só a validade atual)"
        )
        for d in v.windows:
            if d >= h:
                drive(v, d, (t.driver_id, "renewed_late_valid"))
            elif d >= h - 10:
                drive(v, d, (aux[0], ok))
        done["renewed_late_valid"] = v.vid
    # id_written_otherwise: the tracker writes the titular's id 'sint-c1' for 'SINT-C0001'
    v = _pick(pool, range(n))
    if v is not None:
        prefix, number = b.titular[v.vid].rsplit("C", 1)
        for d in v.windows:
            drive(v, d, (f"{prefix.lower()}c{int(number)}", "id_written_otherwise"))
        done["id_written_otherwise"] = v.vid
    return done


def _vehicle_cases(b: _Builder, used: set[str]) -> dict[str, Any]:
    """inspection_overdue and its look-alikes, alvará issued the first day of service."""
    sim = b.sim
    n = sim.days
    done: dict[str, Any] = {}

    def pool() -> list[Vehicle]:  # vehicles of no episode first, then any candidate
        free = [v for v in _candidates(sim) if v.vid not in done.values()]
        return [v for v in free if v.vid not in used] or free

    a = max(1, n // 2)
    v = _pick(pool(), range(a - 1, n))
    if v is not None:
        v.last_inspection_on = b.date(a - MAX_INSPECTION_AGE_DAYS - 1)
        done["inspection_overdue"] = v.vid
    v = _pick(pool(), range(max(1, n // 3), n))
    if v is not None:
        v.last_inspection_on = b.date(max(1, n // 3))
        done["inspection_renewed_late"] = v.vid
    v = _pick(pool(), range(n))
    if v is not None:
        first = min(v.windows)
        v.alvara_first_issued_on = b.date(first)
        for k in b.reg.links:
            if k.vehicle is v and k.valid_from < b.date(first):
                k.valid_from = b.date(first)
        done["alvara_issued_same_day"] = v.vid
    return done


def build_registry(sim: Sim) -> Registry:
    """Draw the synthetic registry, put ``driver_id`` on the fixes, add the truth rows."""
    b = _Builder(sim)
    b.documents()
    b.roster()
    b.default_plan()
    episodes = _episodes(b)
    used = {x for v in episodes.values() for x in ((v,) if isinstance(v, str) else v)}
    sim.registry_cases = episodes | _vehicle_cases(b, used)
    _apply(sim, b.reg)
    return b.reg


def _apply(sim: Sim, reg: Registry) -> None:
    """Turn the plan into stints on the fixes (``driver_id``) and truth rows."""
    from fleet.simulation import DAY_S

    assert sim.pings is not None
    pings = sim.pings
    t_all = pings["t"].to_numpy()
    occupied = (pings["meter"] == "occupied").to_numpy()
    driver = np.empty(len(pings), dtype=object)
    rides = pd.DataFrame(sim.rides)
    by_vehicle = pings.groupby("vehicle_id", observed=True).indices
    known = {d.driver_id for d in reg.drivers}
    for v in sim.vehicles:
        pos = by_vehicle.get(v.vid)
        if pos is None:
            continue
        t_v, occ_v = t_all[pos], occupied[pos]
        mine = rides[rides["vehicle_id"] == v.vid] if len(rides) else rides
        picks = mine["t_pick"].to_numpy(dtype=float) if len(mine) else np.empty(0)
        drops = mine["t_drop"].to_numpy(dtype=float) if len(mine) else np.empty(0)
        starts: list[float] = []
        names: list[str] = []
        for d in sorted(v.windows):
            s, e, lunch = v.windows[d]
            stints = reg.plan.get((v.vid, d))
            if not stints:
                continue
            bounds = [s - 1800.0]
            if len(stints) == 2:
                k = int(np.searchsorted(t_v, lunch))
                free = np.flatnonzero(~occ_v[k:]) + k
                free = free[t_v[free] < e] if len(free) else free
                if not len(free):
                    stints = stints[:1]
                else:
                    bounds.append(float(t_v[free[0]]))
            bounds.append(e + 1800.0)
            for i, (_, did, tag) in enumerate(stints):
                lo, hi = bounds[i], bounds[i + 1]
                starts.append(lo)
                names.append(did)
                inside = (picks >= lo) & (drops < hi) & (picks // DAY_S == drops // DAY_S)
                if not inside.any():
                    continue
                _truth(sim, v, d, did, tag, lo, hi, registered=did in known)
        if not starts:
            continue
        idx = np.clip(np.searchsorted(np.array(starts), t_v, side="right") - 1, 0, None)
        driver[pos] = np.array(names, dtype=object)[idx]
    sim.pings["driver_id"] = pd.array(driver, dtype="string")


_POSITIVE = {
    "cnh_expired",
    "cnh_suspended",
    "ictp_suspended",
    "ictp_expired",
    "not_registered",
    "not_linked",
}


def _truth(
    sim: Sim,
    v: Vehicle,
    d: int,
    driver_id: str,
    tag: str,
    lo: float,
    hi: float,
    *,
    registered: bool,
) -> None:
    label = "positive" if tag in _POSITIVE else "negative"
    look = tag or "linked_driver"
    note = f"driver {driver_id} on day {d}" + ("" if registered else " (not in the registry)")
    sim.add_truth(DRIVER_KIND, label, look, vehicle_id=v.vid, start=lo, end=hi, note=note)


def drivers_frame(reg: Registry) -> pd.DataFrame:
    """Return the drivers file (docs/formatos.md): a row per driver and status period."""
    rows = []
    for drv in reg.drivers:
        base = {
            "driver_id": drv.driver_id,
            "name": drv.name,
            "synthetic": SYNTHETIC_FLAG,
            "cnh_number": drv.cnh_number,
            "cnh_category": drv.cnh_category,
            "cnh_valid_until": drv.cnh_valid_until.isoformat(),
            "ictp_valid_until": drv.ictp_valid_until.isoformat(),
        }
        if not drv.periods:
            rows.append(base)
        for doc, status, since, until in drv.periods:
            rows.append(
                base
                | {
                    f"{doc}_status": status,
                    f"{doc}_status_since": since.isoformat() if since else "",
                    f"{doc}_status_until": until.isoformat() if until else "",
                }
            )
    columns = [
        "driver_id", "name", "synthetic", "cnh_number", "cnh_category", "cnh_valid_until",
        "ictp_valid_until", "cnh_status", "cnh_status_since", "cnh_status_until",
        "ictp_status", "ictp_status_since", "ictp_status_until",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=columns).fillna("")


def links_frame(reg: Registry) -> pd.DataFrame:
    """Return the driver links file (docs/formatos.md) with the vehicles' current ids."""
    rows = [
        {
            "vehicle_id": k.vehicle.vid,
            "driver_id": k.driver_id,
            "role": k.role,
            "valid_from": k.valid_from.isoformat(),
            "valid_until": k.valid_until.isoformat() if k.valid_until else "",
        }
        for k in reg.links
    ]
    return pd.DataFrame(
        rows, columns=["vehicle_id", "driver_id", "role", "valid_from", "valid_until"]
    )


PROVENANCE = """# Dados sintéticos — simulação (fleet/simulation.py)

NENHUMA PESSOA DESTES ARQUIVOS É REAL.

- `drivers.csv`: condutores FICTÍCIOS (`synthetic` = `sim`): identificadores `SINT-C0001`…,
  nomes "Condutor Fictício 0001"…, números de CNH `SINT0000001`… (nenhuma CNH real tem letras),
  validades e situações sorteadas pela simulação (semente {seed}).
- `driver_links.csv`: vínculos fictícios desses condutores aos prefixos simulados (titular e
  auxiliares), sorteados pela simulação.
- `pings.csv` / `pings.parquet`: deslocamentos SIMULADOS; `driver_id` diz qual condutor
  fictício dirige; `{unregistered}` é um condutor fictício que de propósito não está no cadastro.
- `fleet.csv`: prefixos reais do arquivo de frota de Porto Alegre de 2020 (sem placas), com
  situação e documentos (ano, primeiro emplacamento, alvará, vistoria) SORTEADOS pela simulação.
- `stands.geojson`, `boundary.geojson`: pontos de táxi reais de Porto Alegre (2020) e limite
  municipal do IBGE.
- `truth.csv`, `truth_trips.csv`: o gabarito da simulação (o que foi injetado).
- `thresholds.toml`: `max_inspection_age_days` = {max_age} é parâmetro da simulação, não o prazo
  legal (art. 33 da Lei nº 11.582/2014, fora dos textos incluídos).
"""


def provenance_text(*, seed: int) -> str:
    """Return the ``PROVENANCE.md`` written beside the simulated files (pt-BR)."""
    return PROVENANCE.format(
        seed=seed, unregistered=UNREGISTERED_ID, max_age=MAX_INSPECTION_AGE_DAYS
    )
