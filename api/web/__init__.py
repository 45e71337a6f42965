"""The web console: server-rendered pages (FastAPI + Jinja2) for the four users and the citizen.

Layout
    ``auth.py`` the session cookie, CSRF and :func:`api.web.auth.require_web_roles`;
    ``nav.py`` the landing page, name and nav bar of each role; ``basemap.py`` the background
    of every map (``/mapa-base.geojson`` or configured tiles); ``templating.py``
    :func:`api.web.templating.render` and the static files (``/static/``: ``static/`` here,
    then the maps' vendored Leaflet); ``pages.py`` login, logout and the error pages; one module
    of routes per area, each in :data:`api.main.ROUTERS`, its templates in ``templates/<area>/``:

    =============  ===================  ====================  =====================
    module         paths                templates             roles
    =============  ===================  ====================  =====================
    admin.py       ``/admin…``          ``admin/``            admin
    agent.py       ``/fiscal…``         ``fiscal/``           admin, agent
    supervisor.py  ``/supervisao…``     ``supervisao/``       admin, supervisor
    planner.py     ``/planejamento…``   ``planejamento/``     admin, planner
    citizen.py     ``/acessivel…``      ``acessivel/``        anyone (no login)
    =============  ===================  ====================  =====================

A new page
    A route in its area's module: ``web: AgentUser`` (the area's ``require_web_roles``) and
    ``return render(request, "fiscal/x.html", web=web, title="…")``; the template extends
    ``base.html`` and fills ``{% block main %}`` (one ``<h1>``). A form posts
    ``{{ ui.csrf_field(csrf_token) }}`` (or a script sends the ``csrf-token`` meta as
    ``X-CSRF-Token``): ``require_web_roles`` checks it on every POST/PUT/PATCH/DELETE. Scripts
    and styles are files under ``static/`` linked with ``static_url(…)``: the CSP forbids
    inline code. A link in the nav bar: ``nav.NAV``. A row in ``tests/web_pages.py``: the
    authorisation matrix, the CSP check and the axe check then cover the page.
"""
