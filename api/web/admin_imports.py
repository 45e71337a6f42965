"""Fleet and stand file import (``/admin/importacao``): a preview of the rejected rows first.

Upload
    The file (at most :func:`max_upload_bytes`) is kept on the server, under the data directory,
    in a folder of the session (the digest of its token) with a random id; it expires after
    :data:`UPLOAD_TTL_S`. Nothing the browser sends back but that id is trusted.
Preview (nothing written)
    The loaders of ``pontual import fleet|stands`` read the file (:func:`fleet.loaders.read_fleet`,
    :func:`stands.loaders.read_stands_registry`) and write it
    (:func:`db.fleet.store.load_fleet`, :func:`stands.loaders.load_stands`) in a transaction that is
    rolled back. The fleet reader names every problem of every row
    (:class:`fleet.loaders.FleetRowsError`, the same check as the CLI's): those rows are
    rejected with all their reasons at once. The rest is triaged by running the loaders on parts
    of the file (:func:`triage`), as they refuse a whole part at its first bad row: a part that
    loads is good, a part that fails is halved until the failing rows stand alone, each with the
    loader's own pt-BR reason. Rows that only fail together (a repeated id) are found the same
    way: the later one is rejected. A CSV row is numbered as a spreadsheet shows it
    (:func:`fleet.loaders.sheet_row`: the header is row 1), a GeoJSON feature from 1, as the
    readers number them.
Confirm
    An explicit "Importar" (CSRF) triages the stored file again and writes exactly the good rows
    in one transaction, with one audit entry; if the result differs from the preview (the
    database changed meanwhile), nothing is written and the new preview is shown.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import datetime as dt
import hashlib
import json
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request, UploadFile
from fastapi.responses import RedirectResponse
from sqlalchemy import Engine
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from starlette.responses import Response

from api.deps import EngineDep, SettingsDep
from api.settings import Settings
from api.web import formats as fmt
from api.web.admin_base import AdminUser, audit, form_number, form_text
from api.web.auth import WebSession
from api.web.templating import render
from fleet._errors import FleetError
from fleet.ids import registry_id_problem
from geo.calendar import local_today
from stands._errors import StandsError

router = APIRouter(include_in_schema=False)

FLEET, STANDS = "frota", "pontos"
KINDS = {FLEET: "Frota (CSV)", STANDS: "Pontos de táxi (GeoJSON ou CSV)"}
EXTENSIONS = {FLEET: (".csv",), STANDS: (".geojson", ".json", ".csv")}
UPLOAD_DIR = "web-imports"
UPLOAD_TTL_S = 3600
"""How long an uploaded file waits for its confirmation (seconds)."""
MAX_CHECKS = 400
"""Most loader runs one triage may take; a file with more bad rows is refused whole."""
MAX_SHOWN = 50
"""Most rejected rows listed on the page (all are counted)."""
_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
_IBGE_CODE = re.compile(r"^\d{7}$")
_POSITIONS = re.compile(r"\b(linhas|linha|feições|feição) (\d+(?:, \d+)*)")
_KEYS = ("vehicle_id", "prefixo", "stand_id", "codigo", "ID")
_UNREADABLE = (FleetError, StandsError, ValueError, KeyError, OSError, UnicodeError, csv.Error)


def max_upload_bytes(settings: Settings) -> int:
    """Return the largest file accepted: the server's request body limit less 64 KiB of form."""
    return max(1024, settings.max_body_bytes - 64 * 1024)


def first_row(csv: bool) -> int:
    """Return the number the readers give a file's first data row.

    A CSV's: the spreadsheet's (:func:`fleet.loaders.sheet_row`, 2; the header is row 1); a
    GeoJSON's first feature: 1.
    """
    from fleet.loaders import sheet_row

    return sheet_row(0) if csv else 1


# --- the file, in parts -----------------------------------------------------------------------


class FileParts:
    """A CSV or GeoJSON file whose data rows (features) can be written out in any subset."""

    def __init__(self, path: Path, *, source: str) -> None:
        """Read ``path``; its errors name ``source`` (the file's name as the user knows it)."""
        self.path = path
        self.csv = path.suffix.lower() == ".csv"
        from fleet.loaders import decoded_text, registry_records

        text = decoded_text(path.read_bytes(), source=source)
        if not text.strip():
            msg = "o arquivo está vazio"
            raise ValueError(msg)
        if self.csv:  # parts keep the file's separator, so its decimal commas read as in the CLI
            self.header, records, self.delimiter = registry_records(text, source=source)
            self.records: list[Any] = records
        else:
            from stands.layers import parse_geojson

            doc = parse_geojson(text)
            features = doc.get("features") if isinstance(doc, dict) else None
            if not isinstance(features, list):
                msg = f"'{source}' não é um GeoJSON FeatureCollection com a lista 'features'"
                raise ValueError(msg)
            self.doc = doc
            self.records = features

    def __len__(self) -> int:
        return len(self.records)

    def key(self, i: int) -> str:
        """Return the id a person knows row ``i`` by (vehicle_id, prefixo, stand_id...)."""
        record = self.records[i]
        if self.csv:
            values = dict(zip(self.header, record, strict=False))
        else:
            props = record.get("properties") if isinstance(record, dict) else None
            values = props if isinstance(props, dict) else {}
        for name in _KEYS:
            if values.get(name) not in (None, ""):
                return str(values[name])
        return ""

    def write(self, rows: list[int], target: Path) -> Path:
        """Write the rows ``rows`` (indices, in file order) to ``target``; return it."""
        if self.csv:
            with target.open("w", encoding="utf-8", newline="") as out:
                writer = csv.writer(out, delimiter=self.delimiter, lineterminator="\n")
                writer.writerow(self.header)
                writer.writerows(self.records[i] for i in rows)
        else:
            doc = dict(self.doc)
            doc["features"] = [self.records[i] for i in rows]
            target.write_text(json.dumps(doc), encoding="utf-8")
        return target


def renumber(message: str, rows: list[int], *, first: int = 1) -> str:
    """Return a loader's message about a part of the file with the file's own row numbers.

    ``rows`` are the part's rows (file indices, 0-based); ``first`` is the number the reader
    gives the first data row (:func:`first_row`).
    """

    def to_file(match: re.Match[str]) -> str:
        numbers = [int(n) for n in match.group(2).split(", ")]
        mapped = [
            str(rows[n - first] + first) if 0 <= n - first < len(rows) else str(n) for n in numbers
        ]
        return f"{match.group(1)} {', '.join(mapped)}"

    return _POSITIONS.sub(to_file, message)


@dataclass
class Triage:
    """Rows that load (``good``), rows refused with their reason, or the file refused whole."""

    good: list[int] = field(default_factory=list)
    rejected: dict[int, str] = field(default_factory=dict)
    file_error: str | None = None
    checks: int = 0


class _TooManyChecksError(Exception):
    pass


def triage(n: int, check: Callable[[list[int]], str | None], *, max_checks: int) -> Triage:
    """Sort rows ``0..n-1`` into good and rejected with ``check`` (None: the rows load).

    ``check([])`` failing is a file error (a missing column...). Rows that fail alone are
    found by halving the parts that fail; rows that fail only with others (a repeated id) by
    the shortest failing prefix of the good ones: its last row is rejected.
    """
    out = Triage()

    def run(rows: list[int]) -> str | None:
        if out.checks >= max_checks:
            raise _TooManyChecksError
        out.checks += 1
        return check(rows)

    def halve(rows: list[int]) -> None:
        if not rows:
            return
        error = run(rows)
        if error is None:
            out.good.extend(rows)
        elif len(rows) == 1:
            out.rejected[rows[0]] = error
        else:
            middle = len(rows) // 2
            halve(rows[:middle])
            halve(rows[middle:])

    try:
        out.file_error = run([])
        if out.file_error is not None:
            return out
        halve(list(range(n)))
        out.good.sort()
        while out.good and (error := run(out.good)) is not None:
            low, high = 1, len(out.good)
            while low < high:
                middle = (low + high) // 2
                if run(out.good[:middle]) is None:
                    low = middle + 1
                else:
                    high = middle
            culprit = out.good[low - 1]
            out.rejected[culprit] = run(out.good[:low]) or error
            out.good.remove(culprit)
    except _TooManyChecksError:
        out.file_error = (
            f"muitas linhas rejeitadas (a triagem passou de {max_checks} leituras); corrija o "
            "arquivo pelas primeiras razões listadas e envie de novo"
        )
    return out


# --- loading a part -----------------------------------------------------------------------------


def _read(kind: str, path: Path, options: dict[str, Any]) -> Any:
    if kind == FLEET:
        from fleet.loaders import read_fleet

        return read_fleet(path, municipality=options.get("municipality"))
    from stands.loaders import read_stands_registry, with_id_prefix

    frame = read_stands_registry(
        path, municipality=options.get("municipality"), point_radius_m=options["radius_m"]
    )
    return with_id_prefix(frame, options.get("id_prefix") or "")


RETIRED = "Pontos desativados (ausentes do arquivo)"
"""Count of the stands an import of stands retires (the confirmation names it)."""


def _load(kind: str, conn: Connection, frame: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Write a read frame as ``pontual import`` does; return the counts (pt-BR labels)."""
    if kind == FLEET:
        from db.fleet.store import load_fleet

        as_of = dt.date.fromisoformat(options["as_of"])
        fleet = load_fleet(conn=conn, fleet=frame, as_of=as_of)
        return {
            "Veículos criados": fleet.vehicles.created,
            "Veículos atualizados": fleet.vehicles.updated,
            "Veículos inalterados": fleet.vehicles.unchanged,
            "Situações registradas": fleet.statuses_created,
            "Situações encerradas": fleet.statuses_closed,
            "Licenças criadas": fleet.licences_created,
            "Licenças encerradas": fleet.licences_ended,
            "Licenças inalteradas": fleet.licences_unchanged,
            "Pontos não encontrados": fleet.unmatched_lines(),
            "Licenças recusadas (prefixo excluído do ponto)": fleet.excluded_lines(),
        }
    from db.stands.store import load_stands

    report = load_stands(conn=conn, stands=frame, retire_missing=options["retire_missing"])
    return {
        "Pontos criados": report.created,
        "Pontos atualizados": report.updated,
        "Pontos inalterados": report.unchanged,
        RETIRED: report.retired,
        "Avisos": list(report.notes),
    }


def _municipality_problem(engine: Engine, code: str) -> str | None:
    """Return why the form's municipality cannot be used (not in the registry), or None."""
    from sqlalchemy import text

    from db.stands.store import unregistered_municipality

    with engine.connect() as conn:
        found = conn.execute(
            text("SELECT 1 FROM municipalities WHERE code = :code"), {"code": code}
        ).first()
    return None if found is not None else unregistered_municipality(code)


@contextlib.contextmanager
def _rolled_back(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            yield conn
        finally:
            transaction.rollback()


@dataclass
class Preview:
    """What importing the stored file would do."""

    rows: int
    triage: Triage
    counts: dict[str, Any]
    rejected: list[dict[str, Any]]
    """Each rejected row: ``row`` (its number, :func:`first_row`), ``key``, ``reason`` (the
    first) and ``reasons`` (every problem found)."""

    @property
    def good_digest(self) -> str:
        """Digest of the good rows (the confirmation writes only if it is unchanged)."""
        return hashlib.sha256(json.dumps(self.triage.good).encode()).hexdigest()


def preview(
    *, engine: Engine, kind: str, path: Path, name: str, options: dict[str, Any], work: Path
) -> tuple[Preview, Callable[[Connection], dict[str, Any]] | None]:
    """Triage the file and load its good rows in a rolled-back transaction.

    Returns the preview and, when there is something to write, the function that writes the
    good rows on a connection (the caller's transaction).
    """
    try:
        parts = FileParts(path, source=name)
    except _UNREADABLE as exc:
        result = Triage(file_error=f"arquivo ilegível: {exc}")
        return Preview(rows=0, triage=result, counts={}, rejected=[]), None
    part_path = work / name
    first = first_row(parts.csv)

    def read_rows(rows: list[int]) -> Any:
        return _read(kind, parts.write(rows, part_path), options)

    def readable(rows: list[int]) -> str | None:
        try:
            read_rows(rows)
        except _UNREADABLE as exc:
            return renumber(str(exc), rows, first=first)
        return None

    def loadable(rows: list[int]) -> str | None:
        try:
            frame = read_rows(rows)
            with _rolled_back(engine) as conn:
                _load(kind, conn, frame, options)
        except _UNREADABLE as exc:
            return renumber(str(exc), rows, first=first)
        return None

    # Every problem of every row, where the reader names them all (the fleet's).
    reasons = _row_problems(lambda: read_rows(list(range(len(parts)))))
    rest = [i for i in range(len(parts)) if i not in reasons]
    found = triage(len(rest), lambda rows: readable([rest[i] for i in rows]), max_checks=MAX_CHECKS)
    found.rejected = {rest[i]: reason for i, reason in found.rejected.items()}
    found.good = [rest[i] for i in found.good]
    if found.file_error is None:
        found.rejected |= {i: problems[0] for i, problems in reasons.items()}
    if found.file_error is None and found.good:
        # The writers' own checks (municipalities, ids of another registry...) on the rest.
        good = found.good
        again = triage(len(good), lambda rows: loadable([good[i] for i in rows]), max_checks=60)
        found.checks += again.checks
        found.file_error = again.file_error
        found.rejected |= {good[i]: reason for i, reason in again.rejected.items()}
        found.good = [good[i] for i in again.good]
    rejected = [
        {
            "row": i + first,
            "key": parts.key(i),
            "reason": reason,
            "reasons": reasons.get(i, [reason]),
        }
        for i, reason in sorted(found.rejected.items())
    ]
    counts: dict[str, Any] = {}
    writer = None
    if found.file_error is None and found.good:
        frame = read_rows(found.good)
        with _rolled_back(engine) as conn:
            counts = _load(kind, conn, frame, options)

        def writer(conn: Connection) -> dict[str, Any]:
            return _load(kind, conn, frame, options)

    return Preview(rows=len(parts), triage=found, counts=counts, rejected=rejected), writer


def _row_problems(read_all: Callable[[], Any]) -> dict[int, list[str]]:
    """Return every problem of every row the reader names (by row index), or none."""
    from fleet.loaders import FleetRowsError

    try:
        read_all()
    except FleetRowsError as exc:
        return exc.problems
    except _UNREADABLE:
        pass  # a file error or a problem named one at a time: triaged
    return {}


# --- the stored upload ----------------------------------------------------------------------------


def _session_dir(settings: Settings, web: WebSession) -> Path:
    return Path(settings.data_dir) / UPLOAD_DIR / web.token_digest[:32]


def _expire(settings: Settings) -> None:
    """Delete uploads older than :data:`UPLOAD_TTL_S` (of every session)."""
    root = Path(settings.data_dir) / UPLOAD_DIR
    if not root.is_dir():
        return
    limit = time.time() - UPLOAD_TTL_S
    for folder in root.glob("*/*"):
        with contextlib.suppress(OSError):
            if folder.is_dir() and folder.stat().st_mtime < limit:
                shutil.rmtree(folder, ignore_errors=True)
    for folder in root.glob("*"):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty


def _upload_dir(settings: Settings, web: WebSession, upload_id: str) -> Path | None:
    """Return the folder of an upload of this session, if it exists and has not expired."""
    if not _ID.match(upload_id or ""):
        return None
    folder = _session_dir(settings, web) / upload_id
    meta = folder / "meta.json"
    if not meta.is_file() or folder.stat().st_mtime < time.time() - UPLOAD_TTL_S:
        return None
    return folder


def _meta(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    return data


def _save_meta(folder: Path, meta: dict[str, Any]) -> None:
    (folder / "meta.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")


def _safe_name(name: str, suffix: str) -> str:
    """Return the uploaded file's name, safe for the disk, with its extension (for the loaders)."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", Path(name or "").stem).strip("_") or "arquivo"
    return stem[:100] + suffix


# --- pages ------------------------------------------------------------------------------------

_SCALAR = r"""(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|None|True|False)"""
_ITEMS = rf"\s*(?:{_SCALAR}\s*(?:,\s*{_SCALAR}\s*)*,?\s*)?"
_SEQUENCE = re.compile(rf"\[{_ITEMS}\]|\({_ITEMS}\)")
"""A Python list or tuple of texts and numbers, as ``repr`` writes it."""


def readable_message(message: str) -> str:
    """Return a loader's message with the Python lists it quotes written as text.

    ``"colunas presentes: ['foo', 'bar']"`` → ``"colunas presentes: foo, bar"``; an empty
    list is ``"nenhuma"``. Only lists (and tuples) holding a text, or empty, are rewritten:
    a range such as ``[1, 1000]`` stays as it is. The messages come from the loaders
    (e.g. :func:`stands.layers._require_columns`, the ``era {value!r}`` of a property that is
    a list in a GeoJSON).
    """

    def text(match: re.Match[str]) -> str:
        literal = match.group(0)
        try:
            value = ast.literal_eval(literal)
        except (ValueError, SyntaxError):
            return literal
        if not isinstance(value, list | tuple):
            return literal
        if not value:
            return "nenhuma" if literal.startswith("[") else literal
        if not any(isinstance(v, str) for v in value):
            return literal
        return ", ".join(str(v) for v in value)

    return _SEQUENCE.sub(text, message)


def _readable_counts(counts: dict[str, Any]) -> dict[str, Any]:
    return {
        label: [readable_message(str(v)) for v in value] if isinstance(value, list) else value
        for label, value in counts.items()
    }


def _readable_upload(upload: dict[str, Any] | None) -> dict[str, Any] | None:
    """Return a stored upload with the loaders' messages readable (the stored one unchanged)."""
    if not upload or not upload.get("preview"):
        return upload
    shown = dict(upload.get("preview") or {})
    shown["rejected"] = [
        r
        | {
            "reason": readable_message(str(r.get("reason") or "")),
            "reasons": [readable_message(str(m)) for m in r.get("reasons") or [r.get("reason")]],
        }
        for r in shown.get("rejected") or []
    ]
    if shown.get("file_error"):
        shown["file_error"] = readable_message(str(shown["file_error"]))
    shown["counts"] = _readable_counts(shown.get("counts") or {})
    done = upload.get("done")
    if done:
        done = done | {"counts": _readable_counts(done.get("counts") or {})}
    return upload | {"preview": shown, "done": done}


def _page(
    request: Request,
    *,
    web: AdminUser,
    settings: Settings,
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    upload: dict[str, Any] | None = None,
    status_code: int = 200,
    notice: str | None = None,
) -> Response:
    preview = (upload or {}).get("preview") or {}
    return render(
        request,
        "admin/importacao.html",
        web=web,
        title="Importação de arquivos",
        status_code=status_code,
        kinds=KINDS,
        errors=errors or {},
        values=values or {"kind": FLEET, "radius_m": "30", "retire_missing": ""},
        upload=_readable_upload(upload),
        max_bytes=max_upload_bytes(settings),
        max_size=fmt.file_size(max_upload_bytes(settings)),
        fmt=fmt,
        size=fmt.file_size(int((upload or {}).get("size") or 0)),
        max_shown=MAX_SHOWN,
        notice=notice,
        retiring=int((preview.get("counts") or {}).get(RETIRED) or 0),
    )


@router.get("/admin/importacao", name="web_admin_import")
def import_page(
    request: Request, web: AdminUser, settings: SettingsDep, envio: str = ""
) -> Response:
    """Show the upload form; with ``envio``, the preview (or the result) of that upload."""
    if not envio:
        return _page(request, web=web, settings=settings)
    folder = _upload_dir(settings, web, envio)
    if folder is None:
        notice = "Esta prévia expirou ou não existe; envie o arquivo de novo."
        return _page(request, web=web, settings=settings, notice=notice)
    return _page(
        request, web=web, settings=settings, upload={"done": None} | _meta(folder) | {"id": envio}
    )


async def _read_upload(file: UploadFile, limit: int) -> bytes | None:
    chunks, size = [], 0
    while chunk := await file.read(256 * 1024):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


@router.post("/admin/importacao", name="web_admin_import_upload")
async def upload(
    request: Request,
    web: AdminUser,
    engine: EngineDep,
    settings: SettingsDep,
    file: UploadFile | None = None,
    kind: Annotated[str, Form(max_length=20)] = FLEET,
    municipality: Annotated[str, Form(max_length=20)] = "",
    as_of: Annotated[str, Form(max_length=40)] = "",
    radius_m: Annotated[str, Form(max_length=40)] = "30",
    retire_missing: Annotated[str, Form(max_length=5)] = "",
    id_prefix: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    """Keep the file on the server and run the preview (nothing written); show it."""
    values = {
        "kind": kind,
        "municipality": municipality,
        "as_of": as_of,
        "radius_m": radius_m,
        "retire_missing": retire_missing,
        "id_prefix": id_prefix,
    }
    limit = max_upload_bytes(settings)

    def refuse(errors: dict[str, str], status: int = 422) -> Response:
        return _page(
            request, web=web, settings=settings, errors=errors, values=values, status_code=status
        )

    if kind not in KINDS:
        return refuse({"kind": f"tipo {kind!r} desconhecido; esperado um de {', '.join(KINDS)}"})
    if file is None or not file.filename:
        return refuse({"file": "escolha o arquivo a importar"})
    suffix = Path(file.filename).suffix.lower()
    if suffix not in EXTENSIONS[kind]:
        allowed = ", ".join(EXTENSIONS[kind])
        return refuse({"file": f"arquivo {suffix or 'sem extensão'}; esperado {allowed}"})
    content = await _read_upload(file, limit)
    if content is None:
        return refuse({"file": f"arquivo maior que o limite de {fmt.file_size(limit)}"}, 413)
    try:
        options = _options(
            kind=kind, values=values, content=content, suffix=suffix, zone=settings.timezone
        )
    except ValueError as exc:
        field_name = exc.args[1] if len(exc.args) > 1 else ""
        return refuse({field_name: str(exc.args[0])})
    from starlette.concurrency import run_in_threadpool

    if options["municipality"] is not None:
        problem = await run_in_threadpool(_municipality_problem, engine, options["municipality"])
        if problem is not None:
            return refuse({"municipality": problem})
    _expire(settings)
    upload_id = secrets.token_urlsafe(24)
    folder = _session_dir(settings, web) / upload_id
    folder.mkdir(parents=True, mode=0o700)
    name = _safe_name(file.filename, suffix)
    stored = folder / f"upload{suffix}"
    stored.write_bytes(content)
    meta = {
        "kind": kind,
        "name": name,
        "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        "options": options,
        "uploaded_at": dt.datetime.now(dt.UTC).isoformat(),
    }
    meta["preview"] = await run_in_threadpool(
        _preview_meta, engine=engine, meta=meta, stored=stored, folder=folder
    )
    _save_meta(folder, meta)
    return RedirectResponse(f"/admin/importacao?envio={upload_id}", status_code=303)


def _options(
    *, kind: str, values: dict[str, str], content: bytes, suffix: str, zone: str
) -> dict[str, Any]:
    """Return the loader's options from the form (as ``pontual import`` takes them)."""
    municipality = form_text(values["municipality"])
    if municipality is not None and not _IBGE_CODE.match(municipality):
        msg = f"{municipality!r} não é um código IBGE; use os 7 dígitos do município (ex.: 4314902)"
        raise ValueError(msg, "municipality")
    if kind == STANDS:
        try:
            radius = form_number(values["radius_m"], field="radius_m")
        except ValueError as exc:
            raise ValueError(str(exc), "radius_m") from None
        prefix = values["id_prefix"].strip()
        if prefix and (problem := registry_id_problem(prefix)) is not None:
            raise ValueError(f"prefixo {problem}", "id_prefix")
        return {
            "municipality": municipality,
            "radius_m": 30.0 if radius is None else float(radius),
            "retire_missing": values["retire_missing"] == "1",
            "id_prefix": prefix,
        }
    as_of = form_text(values["as_of"])
    if as_of is None:
        as_of = _file_as_of(content) or local_today(zone).isoformat()
    try:
        as_of = dt.date.fromisoformat(as_of).isoformat()
    except ValueError:
        raise ValueError(f"data {as_of!r} inválida; esperado AAAA-MM-DD", "as_of") from None
    return {"municipality": municipality, "as_of": as_of}


def _file_as_of(content: bytes) -> str | None:
    """Return the date a fleet file describes: its ``data_extracao`` (as the CLI does)."""
    from fleet.loaders import extraction_date

    return extraction_date(content)


def _preview_meta(*, engine: Engine, meta: dict[str, Any], stored: Path, folder: Path) -> Any:
    work = folder / "partes"
    work.mkdir(exist_ok=True)
    try:
        result, _ = preview(
            engine=engine,
            kind=meta["kind"],
            path=stored,
            name=meta["name"],
            options=meta["options"],
            work=work,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "rows": result.rows,
        "good": len(result.triage.good),
        "good_digest": result.good_digest,
        "rejected_count": len(result.rejected),
        "problem_count": sum(len(r["reasons"]) for r in result.rejected),
        "rejected": result.rejected[:MAX_SHOWN],
        "file_error": result.triage.file_error,
        "counts": result.counts,
    }


@router.post("/admin/importacao/confirmar", name="web_admin_import_confirm")
def confirm(
    request: Request,
    web: AdminUser,
    engine: EngineDep,
    settings: SettingsDep,
    envio: Annotated[str, Form(max_length=100)] = "",
) -> Response:
    """Write the good rows of the stored file (triaged again); one audit entry."""
    folder = _upload_dir(settings, web, envio)
    if folder is None:
        notice = "Esta prévia expirou ou não existe; envie o arquivo de novo."
        return _page(request, web=web, settings=settings, notice=notice, status_code=410)
    claim = folder / "gravando"  # one writer per upload: a second tab's confirm waits its turn
    try:
        claim.mkdir()
    except FileExistsError:
        notice = (
            "Esta importação já está sendo gravada (em outra aba ou janela); recarregue a "
            "página em instantes para ver o resultado."
        )
        meta = _meta(folder)
        upload = {"done": None} | meta | {"id": envio}
        return _page(
            request, web=web, settings=settings, upload=upload, notice=notice, status_code=409
        )
    try:
        return _confirm_claimed(request, web, engine, settings, folder, envio)
    finally:
        claim.rmdir()


def _confirm_claimed(
    request: Request,
    web: WebSession,
    engine: Engine,
    settings: Settings,
    folder: Path,
    envio: str,
) -> Response:
    meta = _meta(folder)
    if meta.get("done"):
        return RedirectResponse(f"/admin/importacao?envio={envio}", status_code=303)
    stored = next(folder.glob("upload.*"))
    work = folder / "partes"
    work.mkdir(exist_ok=True)
    try:
        result, writer = preview(
            engine=engine,
            kind=meta["kind"],
            path=stored,
            name=meta["name"],
            options=meta["options"],
            work=work,
        )
        changed = result.good_digest != meta["preview"]["good_digest"]
        if changed or writer is None or result.triage.file_error is not None:
            meta["preview"] = _preview_meta(engine=engine, meta=meta, stored=stored, folder=folder)
            _save_meta(folder, meta)
            notice = (
                "O resultado da validação mudou desde a prévia (o cadastro foi alterado); "
                "nada foi gravado. Revise a nova prévia."
                if changed
                else "Não há linhas válidas a importar; nada foi gravado."
            )
            return _page(
                request,
                web=web,
                settings=settings,
                upload={"done": None} | meta | {"id": envio},
                notice=notice,
                status_code=409,
            )
        with engine.begin() as conn, Session(bind=conn) as session:
            counts = writer(conn)
            audit(
                session,
                web=web,
                action="import",
                entity="fleet_file" if meta["kind"] == FLEET else "stands_file",
                entity_id=meta["sha256"][:16],
                file=meta["name"],
                sha256=meta["sha256"],
                options=meta["options"],
                rows=result.rows,
                imported=len(result.triage.good),
                rejected_rows=[r["row"] for r in result.rejected],
                counts=counts,
            )
            session.flush()  # written with the rows, in their transaction
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta["done"] = {
        "at": dt.datetime.now(dt.UTC).isoformat(),
        "imported": len(result.triage.good),
        "counts": counts,
    }
    _save_meta(folder, meta)
    (stored).unlink(missing_ok=True)
    return RedirectResponse(f"/admin/importacao?envio={envio}", status_code=303)
