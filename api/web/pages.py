"""Login, logout, the way in (``/``, ``/painel``) and the console's error pages.

:func:`install` mounts the static files and answers the console's errors with pt-BR pages:
login needed (303 to ``/entrar?next=…``), role not allowed and CSRF failure (403), and, for a
browser outside the JSON API, a malformed request (400), a page not found (404), a method not
allowed (405), a body that stopped arriving (408) or too large (413; :func:`refusal_page` when
the body limit refuses it before the app), and a form or query whose fields fail their types or
limits (422, :func:`validation_page`: each field by its label and what it accepts; nothing was
stored, as the handler never ran).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, cast
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, FastAPI, Form, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import Scope

from api import accounts
from api._errors import RateLimitedError, UserAdminError
from api.deps import SessionDep, SettingsDep, login_attempt, login_rate_limit, login_succeeded
from api.errors import _http_error as json_http_error
from api.limits import form_limit
from api.schemas import pt_message
from api.security import MIN_PASSWORD_LENGTH
from api.web import formats as fmt
from api.web._errors import (
    CsrfError,
    LoginRequiredError,
    PasswordChangeRequiredError,
    WebForbiddenError,
)
from api.web.admin_base import audit
from api.web.auth import (
    BACK_STATE,
    LOGIN_PATH,
    LOGOUT_PATH,
    PASSWORD_PATH,
    SESSION_COOKIE,
    VIEWER_STATE,
    OptionalWebSession,
    OwnAccount,
    WebSession,
    back_path,
    check_csrf,
    clear_cookie,
    csrf_token_for,
    pre_session_seed,
    remember_viewer,
    safe_next,
    set_pre_session_cookie,
    set_session_cookie,
    verify_login_csrf,
)
from api.web.nav import LANDING, ROLE_LABELS
from api.web.templating import STATIC_PREFIX, render, static_files
from db.accounts.models import User

router = APIRouter(include_in_schema=False)

BAD_CREDENTIALS = "Usuário ou senha incorretos, ou conta desativada."
EMPTY_LOGIN = "Preencha o usuário e a senha."
TOO_MANY_LOGINS = "Muitas tentativas de entrada. Tente novamente em {retry} s."
"""Login refused by either quota (of the address, of the account): one message for both."""
NOTICES = {
    "saiu": "Você saiu. Até logo!",
    "expirou": "Sua sessão terminou (saída, expiração ou mudança na conta). Entre novamente.",
}
"""Messages of the login page, by its ``aviso`` query parameter."""
API_PREFIXES = ("/api/", "/osmand", "/docs", "/openapi.json", "/health", "/ready")
"""Paths whose errors stay JSON whoever asks."""
_PARAM_PLACES = frozenset({"body", "query", "path", "header", "cookie"})


def _redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def landing(web: WebSession) -> str:
    """Return the page a logged-in user starts on."""
    return LANDING[web.principal.role]


@router.get("/", name="web_root")
def root(web: OptionalWebSession) -> Response:
    """Send the visitor to their page, or to the login."""
    return _redirect(landing(web) if web is not None else LOGIN_PATH)


@router.get("/painel", name="web_panel")
def panel(web: OptionalWebSession) -> Response:
    """Send a logged-in user to their role's page, else to the login."""
    return _redirect(landing(web) if web is not None else LOGIN_PATH)


def _login_page(
    request: Request,
    *,
    next_path: str | None,
    username: str = "",
    error: str | None = None,
    notice: str | None = None,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> Response:
    seed, new = pre_session_seed(request)
    response = render(
        request,
        "entrar.html",
        web=None,
        title="Entrar",
        status_code=status_code,
        headers=headers,
        csrf_token=csrf_token_for(seed),
        next_path=next_path or "",
        username=username,
        error=error,
        notice=notice,
    )
    if new:
        set_pre_session_cookie(response, request, seed)
    return response


@router.get(LOGIN_PATH, name="web_login_form")
def login_form(
    request: Request, web: OptionalWebSession, next: str | None = None, aviso: str | None = None
) -> Response:
    """Show the login page (a logged-in user goes on to ``next`` or their page)."""
    wanted = safe_next(next)
    if web is not None:
        return _redirect(wanted or landing(web))
    return _login_page(request, next_path=wanted, notice=NOTICES.get(aviso or ""))


@router.post(LOGIN_PATH, name="web_login", dependencies=[Depends(verify_login_csrf)])
def login(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    username: Annotated[str, Form(max_length=200)] = "",
    password: Annotated[str, Form(max_length=1000)] = "",
    next: Annotated[str, Form(max_length=4000)] = "",
) -> Response:
    """Check the credentials; open a session and go on.

    The API's login quotas apply: logins per address, failed logins per account.
    """
    wanted = safe_next(next)
    try:
        login_rate_limit(request)
        key = login_attempt(request, username)
    except RateLimitedError as exc:
        retry = exc.headers.get("Retry-After", "60")
        return _login_page(
            request,
            next_path=wanted,
            username=username,
            error=TOO_MANY_LOGINS.format(retry=retry),
            status_code=429,
            headers={"Retry-After": retry},
        )
    if not username.strip() or not password:
        return _login_page(
            request, next_path=wanted, username=username, error=EMPTY_LOGIN, status_code=422
        )
    user = accounts.authenticate(session=session, username=username.strip(), password=password)
    if user is None:
        return _login_page(
            request, next_path=wanted, username=username, error=BAD_CREDENTIALS, status_code=422
        )
    login_succeeded(request, key)
    old = request.cookies.get(SESSION_COOKIE)
    if old:
        accounts.revoke_token(session=session, token=old)  # no session survives a new login
    going = PASSWORD_PATH if user.password_temporary else wanted or LANDING[user.role]
    return _open_session(request, session, settings, user, going)


def _open_session(
    request: Request, session: SessionDep, settings: SettingsDep, user: User, going: str
) -> Response:
    """Issue ``user`` a session token, commit, and go to ``going`` with its cookie."""
    token, _ = accounts.issue_token(session=session, user=user, ttl_s=settings.token_ttl_s)
    session.commit()
    response = _redirect(going)
    set_session_cookie(response, request, token, max_age_s=settings.token_ttl_s)
    return response


def _password_page(
    request: Request, web: WebSession, *, error: str | None = None, status_code: int = 200
) -> Response:
    return render(
        request,
        "conta_senha.html",
        web=web,
        title="Trocar a senha",
        status_code=status_code,
        required=web.principal.password_temporary,
        username=web.principal.username,
        min_length=MIN_PASSWORD_LENGTH,
        error=error,
    )


@router.get(PASSWORD_PATH, name="web_password_form")
def password_form(request: Request, me: OwnAccount) -> Response:
    """Show the form where a user sets their own password (required after a temporary one)."""
    return _password_page(request, me)


@router.post(PASSWORD_PATH, name="web_password")
def change_password(
    request: Request,
    me: OwnAccount,
    session: SessionDep,
    settings: SettingsDep,
    current: Annotated[str, Form(max_length=1000)] = "",
    new: Annotated[str, Form(max_length=1000)] = "",
    repeat: Annotated[str, Form(max_length=1000)] = "",
) -> Response:
    """Set the user's own password: the current one, the new one twice.

    Every session of the account ends (the password's tokens are revoked) but this one, which
    goes on with a new token to the user's page; the change is in the audit log.
    """
    name = me.principal.username
    problem = None
    if accounts.authenticate(session=session, username=name, password=current) is None:
        problem = "A senha atual não confere."
    elif new != repeat:
        problem = "As duas novas senhas não são iguais."
    elif new == current:
        problem = "A nova senha precisa ser diferente da atual."
    else:
        try:
            user = accounts.set_password(session=session, username=name, password=new)
        except UserAdminError as exc:
            problem = f"Nova senha: {exc}."
    if problem is not None:
        session.rollback()
        return _password_page(request, me, error=problem, status_code=422)
    audit(
        session,
        web=me,
        action="set_password",
        entity="user",
        entity_id=name,
        password="definida pelo próprio usuário",
    )
    return _open_session(request, session, settings, user, LANDING[user.role])


async def _logout_csrf(request: Request, web: OptionalWebSession) -> None:
    """Require the session's CSRF token; without a session there is nothing to end."""
    if web is not None:
        await check_csrf(request, seed=web.token, web=web)


@router.post(LOGOUT_PATH, name="web_logout", dependencies=[Depends(_logout_csrf)])
def logout(request: Request, web: OptionalWebSession, session: SessionDep) -> Response:
    """End the session (its token is revoked, its live streams close) and go to the login."""
    if web is not None:
        accounts.revoke_token(session=session, token=web.token)
        session.commit()
    response = _redirect(f"{LOGIN_PATH}?aviso=saiu")
    clear_cookie(response, request, SESSION_COOKIE)
    return response


# --- errors --------------------------------------------------------------------------------


def _password_required(_: Request, __: Exception) -> Response:
    return _redirect(PASSWORD_PATH)


def _login_required(request: Request, exc: Exception) -> Response:
    exc = cast(LoginRequiredError, exc)
    query = {"next": exc.next_path} if exc.next_path else {}
    if exc.ended:
        query["aviso"] = "expirou"
    response = _redirect(LOGIN_PATH + (f"?{urlencode(query)}" if query else ""))
    if exc.ended:
        clear_cookie(response, request, SESSION_COOKIE)
    return response


def error_page(
    request: Request,
    *,
    web: WebSession | None,
    status_code: int,
    title: str,
    message: str,
    headers: dict[str, str] | None = None,
    problems: Sequence[str] = (),
) -> Response:
    """Return the console's error page (pt-BR), with a way back; ``problems`` listed below."""
    return render(
        request,
        "erro.html",
        web=web,
        title=title,
        status_code=status_code,
        headers=headers,
        message=message,
        problems=problems,
        fixable=status_code == 422,
    )


def _forbidden(request: Request, exc: Exception) -> Response:
    exc = cast(WebForbiddenError, exc)
    role = ROLE_LABELS.get(exc.web.principal.role, exc.web.principal.role)
    allowed = ", ".join(ROLE_LABELS.get(r, r) for r in sorted(exc.allowed))
    message = f"O seu perfil ({role}) não tem acesso a esta página. Ela é reservada a: {allowed}."
    return error_page(request, web=exc.web, status_code=403, title="Acesso negado", message=message)


def _csrf(request: Request, exc: Exception) -> Response:
    exc = cast(CsrfError, exc)
    message = (
        "Este formulário não pôde ser aceito: ele expirou ou não veio desta aplicação "
        "(proteção contra falsificação de requisição, CSRF). Volte, recarregue a página e "
        "tente de novo; os cookies do navegador precisam estar ativados."
    )
    setattr(request.state, BACK_STATE, back_path(request))  # the form's page, to reload
    return error_page(
        request, web=exc.web, status_code=403, title="Formulário recusado", message=message
    )


def _wants_page(request: Request) -> bool:
    """Whether an error is answered with a page: a browser, outside the JSON API's paths."""
    browser = "text/html" in request.headers.get("accept", "")
    return browser and not request.url.path.startswith(API_PREFIXES)


def _status_text(request: Request, status_code: int, reason: str | None = None) -> tuple[str, str]:
    """Title and message of the page of an HTTP error (``reason``: of a form over a limit)."""
    settings = request.app.state.settings
    if status_code == 404:
        return "Página não encontrada", "Não há página neste endereço."
    if status_code == 405:
        return "Ação não permitida", "Esta página não aceita esta ação."
    if status_code == 408:
        return "Envio interrompido", (
            f"O envio parou de chegar ao servidor por mais de {settings.body_read_timeout_s:g} s "
            "e foi cancelado; nada foi gravado. Verifique a conexão e tente de novo."
        )
    if status_code == 413:
        limit = reason or f"até {fmt.file_size(settings.max_body_bytes)} por envio"
        return "Envio grande demais", (
            f"O formulário enviado passa do que o servidor aceita ({limit}). Reduza o texto ou "
            "o arquivo e tente de novo."
        )
    if status_code == 503:
        return "Serviço indisponível", (
            "O servidor não consegue atender agora (banco de dados indisponível ou ocupado); "
            "nada foi gravado. Tente de novo em alguns segundos."
        )
    if status_code >= 500:
        return "Erro interno", (
            "Algo falhou no servidor ao atender este pedido; o incidente foi registrado. Se "
            "você enviava um formulário, confira se ele foi gravado antes de enviá-lo de novo."
        )
    return "Requisição inválida", (
        "O servidor não entendeu o que o navegador enviou. Volte, recarregue a página e "
        "tente de novo."
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    """Answer 400, 404, 405, 408, 413: a pt-BR page for a browser outside the JSON API.

    Elsewhere the API's JSON error. A form over the parser's limits is a 413
    (:func:`api.limits.form_limit`).
    """
    exc = cast(StarletteHTTPException, exc)
    if not _wants_page(request):
        return json_http_error(request, exc)
    reason = form_limit(exc)
    status = 413 if reason is not None else exc.status_code
    title, message = _status_text(request, status, reason)
    # a logged-in user keeps the console's header and menu on a page that does not exist
    web = remember_viewer(request) if request.cookies.get(SESSION_COOKIE) else None
    return error_page(
        request,
        web=web,
        status_code=status,
        title=title,
        message=message,
        headers=dict(exc.headers or {}),
    )


def refusal_page(scope: Scope, status_code: int) -> Response | None:
    """Return the page of a request the body limit refused before the app (413), or None.

    A page for a browser outside the API (the connection closed after it); None: the JSON error.
    """
    request = Request(scope)
    if not _wants_page(request):
        return None
    title, message = _status_text(request, status_code)
    return error_page(
        request,
        web=None,
        status_code=status_code,
        title=title,
        message=message,
        headers={"Connection": "close"},
    )


def server_error_page(request: Request, response: Response) -> Response | None:
    """Return the page of a request the server failed (5xx), or None for the JSON error.

    A page for a browser outside the API; no session lookup (the database may be the failure).
    """
    if not _wants_page(request):
        return None
    title, message = _status_text(request, response.status_code)
    retry = response.headers.get("retry-after")
    try:
        return error_page(
            request,
            web=None,
            status_code=response.status_code,
            title=title,
            message=message,
            headers={"Retry-After": retry} if retry else None,
        )
    except Exception:  # noqa: BLE001 - the page itself failed (a template): the JSON answer stays
        return None


def _field_problem(err: dict[str, Any]) -> str:
    """One validation error as a line of the page: the field's label and what it accepts."""
    where = [str(p) for p in err.get("loc", ()) if p not in _PARAM_PLACES]
    name = where[0] if where else ""
    label = fmt.field_label(name) or "Formulário"
    problem = pt_message(err)
    sent = err.get("input")
    if err.get("type") == "string_too_long" and isinstance(sent, str):
        problem += f" (foram enviados {fmt.integer(len(sent))})"
    return f"{label}: {problem}."


def validation_page(request: Request, exc: RequestValidationError) -> Response | None:
    """Return the page of a request whose fields fail their types or limits (422), or None.

    A page for a browser outside the API (:func:`_wants_page`), naming each field by its label
    and what it accepts; None: the API's JSON 422 (:func:`api.errors.install_error_handlers`).
    A record's number in the address that is not a number (``/admin/usuarios/abc``): the 404
    page.
    """
    if not _wants_page(request):
        return None
    viewer = getattr(request.state, VIEWER_STATE, None)  # the console's header and menu
    if exc.errors() and all(
        tuple(e.get("loc", ()))[:1] == ("path",) and str(e.get("type", "")).startswith("int")
        for e in exc.errors()
    ):  # /admin/usuarios/abc: an address of no record, not a form to correct
        title, message = _status_text(request, 404)
        return error_page(request, web=viewer, status_code=404, title=title, message=message)
    problems = list(dict.fromkeys(_field_problem(dict(err)) for err in exc.errors()))
    message = (
        "Um valor enviado passa do limite ou não é do tipo esperado; nada foi gravado. "
        "Volte, corrija e envie de novo."
    )
    return error_page(
        request,
        web=viewer,
        status_code=422,
        title="Dados não aceitos",
        message=message,
        problems=problems,
    )


def install(app: FastAPI) -> None:
    """Mount the static files and answer the console's errors with pages on ``app``.

    The HTTP error handlers are by status code: they take precedence over the JSON handler of
    :func:`api.errors.install_error_handlers` whatever the order, and hand it the API's paths.
    """
    app.mount(STATIC_PREFIX, static_files(), name="static")
    app.add_exception_handler(LoginRequiredError, _login_required)
    app.add_exception_handler(PasswordChangeRequiredError, _password_required)
    app.add_exception_handler(WebForbiddenError, _forbidden)
    app.add_exception_handler(CsrfError, _csrf)
    for status in (400, 404, 405, 408, 413):
        app.add_exception_handler(status, _http_error)
