"""Write accesses to personal data into the append-only audit log."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from db.enforcement.models import AuditEntry

READ_PERSONAL_DATA = "read_personal_data"


def record_personal_data_access(
    *,
    session: Session,
    actor: str,
    entity: str,
    ids: Sequence[str],
    fields: Sequence[str],
    route: str,
) -> AuditEntry:
    """Add one ``read_personal_data`` entry naming who read which fields of which records.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Session of the request; the caller commits before answering.
    actor : str
        Who read (``user:<name>``).
    entity : str
        Table or kind of record (``vehicles``, ``permit_holders``…).
    ids : sequence of str
        Identifiers of the records returned.
    fields : sequence of str
        Personal fields included in the answer.
    route : str
        Path that served them.
    """
    entry = AuditEntry(
        actor=actor,
        action=READ_PERSONAL_DATA,
        entity=entity,
        entity_id=ids[0] if len(ids) == 1 else None,
        details={"ids": list(ids), "fields": list(fields), "route": route},
    )
    session.add(entry)
    return entry
