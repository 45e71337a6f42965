"""The web console: server-rendered pages (FastAPI + Jinja2) for the four users and the citizen.

Layout
    ``auth.py`` sessions, CSRF and :func:`api.web.auth.require_web_roles`; ``nav.py`` landing
    page, role names and nav bar of each role; ``templating.py`` :func:`render` and the static
    files; ``pages.py`` login, logout and the error pages; one module of routes per area
    (``admin.py``, ``agent.py``, ``supervisor.py``, ``planner.py``, ``citizen.py``), each
    mounted by :data:`api.main.ROUTERS`, with its templates in ``templates/<area>/``.
"""
