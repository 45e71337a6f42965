"""Who acted, as the audit log names them; accesses to personal data written to the log.

A logged-in user is ``user:<username>`` (:func:`user_actor`), the one form every writer of the
log should use. Older rows of the proposals' workflow name the agent bare (``demo_fiscal``):
the log is append-only, so readers treat both as one person (:func:`actor_person`,
:func:`actor_forms`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from db.enforcement.models import AuditEntry

READ_PERSONAL_DATA = "read_personal_data"

USER_ACTOR_PREFIX = "user:"
SYSTEM_ACTOR = "sistema"
"""The platform itself (deadlines, generated proposals): never a person."""


def user_actor(username: str) -> str:
    """Return the audit log's name of the logged-in user ``username`` (``user:<username>``)."""
    return f"{USER_ACTOR_PREFIX}{username}"


def actor_person(actor: str) -> str | None:
    """Return the username a log's actor names, lower-cased; None when it is not a person.

    ``user:Ana`` and a bare ``ana`` (agents' proposal steps, older rows) are the same person
    ``ana`` (usernames ignore case); ``os:root`` (a command line), ``test:…`` or ``sistema``
    are not users.
    """
    actor = actor.strip()
    if actor.startswith(USER_ACTOR_PREFIX):
        name = actor.removeprefix(USER_ACTOR_PREFIX)
    elif ":" in actor or actor == SYSTEM_ACTOR:
        return None
    else:
        name = actor
    return name.lower() or None


def actor_forms(actor: str) -> list[str]:
    """Return the actor strings that name the same as ``actor`` in the log.

    A person: ``[name, "user:name"]``, lower-cased (compare with the log's actor lower-cased);
    anything else: itself, as written.
    """
    person = actor_person(actor)
    if person is None:
        return [actor.strip()]
    return [person, user_actor(person)]


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
        Who read (``user:<name>``, :func:`user_actor`).
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
