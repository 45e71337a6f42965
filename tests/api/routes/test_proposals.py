import datetime as dt
from zoneinfo import ZoneInfo

from api_factories import bearer
from sqlalchemy import select


def _generate(client, tokens) -> dict:
    r = client.post(
        "/api/v1/proposals/generate",
        json={"municipality": "4314902"},
        headers=bearer(tokens["agent"]),
    )
    assert r.status_code == 200, r.text
    listed = client.get(
        "/api/v1/proposals", params={"vehicle_id": "V1"}, headers=bearer(tokens["agent"])
    ).json()
    (gap,) = [p for p in listed["data"] if p["kind"] == "tracking_gap"]
    return gap


class TestProposalRoutes:
    def test_generate_review_and_audit(self, client, seeded, api_engine) -> None:
        """The seeded tracking gap becomes a Porto Alegre proposal (art. 58 IX); an agent
        confirms it and the auto number and the audit trail come back."""
        from db.engine import session_scope
        from db.fleet.models import Municipality

        with session_scope(api_engine) as s:
            if (
                s.execute(select(Municipality).where(Municipality.code == "4314902")).first()
                is None
            ):
                s.add(
                    Municipality(
                        code="4314902", name="Porto Alegre", uf="RS", timezone="America/Sao_Paulo"
                    )
                )
        tokens = seeded["tokens"]
        gap = _generate(client, tokens)
        assert (gap["article"], gap["inciso"], gap["gravity"]) == ("58", "IX", "grave")
        pid = gap["proposal_id"]

        for at in ("2020-01-01T00:00:00Z", "2020-01-01T00:00:00"):  # before the facts; naive
            early = client.post(
                f"/api/v1/proposals/{pid}/confirm", json={"at": at}, headers=bearer(tokens["agent"])
            )
            assert early.status_code == 422, early.text
        r = client.post(
            f"/api/v1/proposals/{pid}/confirm", json={}, headers=bearer(tokens["agent"])
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "confirmada" and body["agent_id"] == "u_agent"
        assert body["auto_number"].startswith("AI-4314902-")
        assert [h["to"] for h in body["history"]] == ["proposta", "confirmada"]
        assert body["finding_ids"] == ["F1"]

        pdf = client.get(f"/api/v1/proposals/{pid}/documents/auto", headers=bearer(tokens["agent"]))
        assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
        assert pdf.content.startswith(b"%PDF")
        html = client.get(
            f"/api/v1/proposals/{pid}/documents/notificacao",
            params={"format": "html"},
            headers=bearer(tokens["agent"]),
        )
        assert html.status_code == 200 and "art. 58" in html.text and "<svg" in html.text

        again = client.post(
            f"/api/v1/proposals/{pid}/confirm", json={}, headers=bearer(tokens["agent"])
        )
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "conflict"

        # Porto Alegre's decree fixes no defence period: the final decision states its end
        auth = bearer(tokens["agent"])
        assert client.post(f"/api/v1/proposals/{pid}/notify", json={}, headers=auth).is_success
        reason = {"reason": "Sem defesa no prazo da lei municipal."}
        final = f"/api/v1/proposals/{pid}/finalize"
        r = client.post(final, json=reason, headers=auth)
        assert r.status_code == 422 and "informe a data" in r.json()["error"]["message"]
        today = dt.datetime.now(ZoneInfo("America/Sao_Paulo")).date()
        r = client.post(final, json=reason | {"period_ended_on": today.isoformat()}, headers=auth)
        assert r.status_code == 422 and "não é anterior ao dia do passo" in r.text  # runs today
        # without a defence period in the rulebook, no delivery of a penalty to date
        r = client.post(f"/api/v1/proposals/{pid}/decision-notification", json={}, headers=auth)
        assert r.status_code == 409 and "não tem prazo de defesa" in r.json()["error"]["message"]

    def test_unknown_is_404_and_planner_is_403(self, client, seeded) -> None:
        """An unknown id is 404; a planner may not review proposals."""
        tokens = seeded["tokens"]
        r = client.post(
            "/api/v1/proposals/P-x/dismiss",
            json={"reason": "motivo de um teste"},
            headers=bearer(tokens["agent"]),
        )
        assert r.status_code == 404
        r = client.get("/api/v1/proposals", headers=bearer(tokens["planner"]))
        assert r.status_code == 403

    def test_a_dismissed_proposal_has_no_auto(self, client, seeded, api_engine) -> None:
        """Dismissed: its auto and notificação are refused (409, the reason said), HTML and
        PDF."""
        from geoalchemy2.shape import from_shape
        from shapely.geometry import Point

        from db.enforcement.models import Finding
        from db.engine import session_scope
        from db.fleet.models import Municipality

        with session_scope(api_engine) as s:
            if s.get(Municipality, "4314902") is None:
                s.add(
                    Municipality(
                        code="4314902", name="Porto Alegre", uf="RS", timezone="America/Sao_Paulo"
                    )
                )
            s.add(
                Finding(
                    finding_id="F-dismissed",
                    kind="operating_while_barred",
                    vehicle_id="V-DIS",
                    stand_id=None,
                    started_at=dt.datetime.now(dt.UTC) - dt.timedelta(hours=3),
                    ended_at=dt.datetime.now(dt.UTC) - dt.timedelta(hours=3),
                    confidence=0.9,
                    details={"reason": "suspended"},
                    geometry=from_shape(Point(-51.2287, -30.0277), srid=4326),
                )
            )
        auth = bearer(seeded["tokens"]["agent"])
        r = client.post(
            "/api/v1/proposals/generate", json={"municipality": "4314902"}, headers=auth
        )
        assert r.status_code == 200, r.text
        (p,) = client.get("/api/v1/proposals", params={"vehicle_id": "V-DIS"}, headers=auth).json()[
            "data"
        ]
        pid = p["proposal_id"]
        reason = {"reason": "Veículo com liminar judicial vigente."}
        assert client.post(f"/api/v1/proposals/{pid}/dismiss", json=reason, headers=auth).is_success
        for kind in ("auto", "notificacao"):
            for fmt in ("pdf", "html"):
                r = client.get(
                    f"/api/v1/proposals/{pid}/documents/{kind}",
                    params={"format": fmt},
                    headers=auth,
                )
                assert r.status_code == 409, r.text
                assert "não há auto de infração" in r.json()["error"]["message"]

    def test_dismiss_requires_reason(self, client, seeded) -> None:
        """A dismissal without a reason is a 422 with a machine-readable body."""
        r = client.post(
            "/api/v1/proposals/P-x/dismiss", json={}, headers=bearer(seeded["tokens"]["agent"])
        )
        assert r.status_code == 422
        assert r.json()["error"]["code"]


class TestGenerateActor:
    def test_http_generation_records_the_caller(self, client, seeded, api_engine) -> None:
        """Proposals generated over HTTP name the logged-in user on their 'create' entry."""
        import datetime as dt
        import secrets

        from geoalchemy2.shape import from_shape
        from shapely.geometry import Point

        from db.enforcement.models import Finding
        from db.engine import session_scope
        from db.fleet.models import Municipality

        finding_id = f"F-ACT-{secrets.token_hex(3)}"
        now = dt.datetime.now(dt.UTC)
        with session_scope(api_engine) as s:
            if s.get(Municipality, "4314902") is None:
                s.add(
                    Municipality(
                        code="4314902", name="Porto Alegre", uf="RS", timezone="America/Sao_Paulo"
                    )
                )
            s.add(
                Finding(
                    finding_id=finding_id,
                    kind="tracking_gap",
                    vehicle_id="V3",
                    stand_id=None,
                    started_at=now - dt.timedelta(days=3, hours=2),
                    ended_at=now - dt.timedelta(days=3, hours=1),
                    confidence=0.9,
                    details={"gap_s": 3600, "still": False, "after_ride": False},
                    geometry=from_shape(Point(-51.2287, -30.0277), srid=4326),
                )
            )
        r = client.post(
            "/api/v1/proposals/generate",
            json={"municipality": "4314902"},
            headers=bearer(seeded["tokens"]["admin"]),
        )
        assert r.status_code == 200 and r.json()["created"] >= 1, r.text
        listed = client.get(
            "/api/v1/proposals",
            params={"vehicle_id": "V3"},
            headers=bearer(seeded["tokens"]["agent"]),
        ).json()["data"]
        detail = [
            client.get(
                f"/api/v1/proposals/{p['proposal_id']}", headers=bearer(seeded["tokens"]["agent"])
            ).json()
            for p in listed
        ]
        (mine,) = [d for d in detail if finding_id in d["finding_ids"]]
        assert mine["history"][0]["action"] == "create"
        assert mine["history"][0]["actor"] == "u_admin"


class TestConfirmAnswers:
    def test_exception_and_pontuacao_over_http(self, client, seeded, api_engine) -> None:
        """POA longer_route (art. 58 XIII) needs the agent's answer to the exception (422
        without it) and art. 57 XI needs the pontuação chosen; the answers are recorded."""
        from geoalchemy2.shape import from_shape
        from shapely.geometry import Point

        from db.enforcement.models import Finding
        from db.engine import session_scope
        from db.fleet.models import Municipality

        now = dt.datetime.now(dt.UTC)
        with session_scope(api_engine) as s:
            if s.get(Municipality, "4314902") is None:
                s.add(
                    Municipality(
                        code="4314902", name="Porto Alegre", uf="RS", timezone="America/Sao_Paulo"
                    )
                )
            for fid, kind, details in (
                ("F-route", "longer_route", {"ratio": 1.9, "reference_may_be_wrong": False}),
                ("F-reserved", "operating_while_barred", {"reason": "reserved"}),
                ("F-weak", "queue_jump", {}),
            ):
                s.add(
                    Finding(
                        finding_id=fid,
                        kind=kind,
                        vehicle_id="V3",
                        stand_id=None,
                        started_at=now - dt.timedelta(hours=3),
                        ended_at=now - dt.timedelta(hours=3),
                        confidence=0.3 if fid == "F-weak" else 0.9,
                        details=details,
                        geometry=from_shape(Point(-51.2287, -30.0277), srid=4326),
                    )
                )
        tokens = seeded["tokens"]
        r = client.post(
            "/api/v1/proposals/generate",
            json={"municipality": "4314902", "confidence_floor": {"queue_jump": 0.5}},
            headers=bearer(tokens["agent"]),
        )
        assert r.status_code == 200, r.text
        assert "F-weak" not in [x["finding_id"] for x in r.json()["for_review"]]  # no rule
        listed = client.get(
            "/api/v1/proposals", params={"vehicle_id": "V3"}, headers=bearer(tokens["agent"])
        ).json()["data"]
        by_kind = {p["kind"]: p["proposal_id"] for p in listed}

        route = f"/api/v1/proposals/{by_kind['longer_route']}/confirm"
        r = client.post(route, json={}, headers=bearer(tokens["agent"]))
        assert r.status_code == 422, r.text
        assert r.json()["error"]["code"] == "invalid_request"
        assert "desnecessário ao atendimento do usuário" in r.json()["error"]["message"]
        answer = "Passageira ouvida: não pediu nem autorizou o desvio."
        r = client.post(route, json={"exception_answer": answer}, headers=bearer(tokens["agent"]))
        assert r.status_code == 200, r.text
        assert r.json()["exception"]["answer"] == answer
        assert r.json()["history"][-1]["exception_answer"] == answer

        barred = f"/api/v1/proposals/{by_kind['operating_while_barred']}/confirm"
        r = client.post(barred, json={}, headers=bearer(tokens["agent"]))
        assert r.status_code == 422 and "condutor, autorizatário" in r.json()["error"]["message"]
        r = client.post(barred, json={"pontuacao": "condutor"}, headers=bearer(tokens["agent"]))
        assert r.status_code == 422 and "não identifica o condutor" in r.text  # no driver_id
        r = client.post(
            barred, json={"pontuacao": "autorizatário"}, headers=bearer(tokens["agent"])
        )
        assert r.status_code == 200, r.text
        assert r.json()["pontuacao"] == "autorizatário"

    def test_generate_lists_low_confidence_for_review(self, client, seeded, api_engine) -> None:
        """A stored finding under the floor comes back in ``for_review``, not as a proposal."""
        import datetime as dt

        from db.enforcement.models import Finding
        from db.engine import session_scope
        from db.fleet.models import Municipality

        with session_scope(api_engine) as s:
            if s.get(Municipality, "4314548") is None:
                s.add(
                    Municipality(
                        code="4314548", name="Pinto Bandeira", uf="RS", timezone="America/Sao_Paulo"
                    )
                )
            s.add(
                Finding(
                    finding_id="F-low-pb",
                    kind="queue_jump",
                    vehicle_id="V2",
                    stand_id="S1",
                    started_at=dt.datetime(2025, 3, 4, 12, tzinfo=dt.UTC),
                    ended_at=dt.datetime(2025, 3, 4, 12, tzinfo=dt.UTC),
                    confidence=0.2,
                    details={},
                )
            )
        r = client.post(
            "/api/v1/proposals/generate",
            json={"municipality": "4314548"},
            headers=bearer(seeded["tokens"]["agent"]),
        )
        assert r.status_code == 200, r.text
        (item,) = [x for x in r.json()["for_review"] if x["finding_id"] == "F-low-pb"]
        assert item["reason"] == "confiança 0,20 abaixo do piso 0,5"
        r = client.post(
            "/api/v1/proposals/generate",
            json={"municipality": "4314548", "confidence_floor": {"default": 2}},
            headers=bearer(seeded["tokens"]["agent"]),
        )
        assert r.status_code == 422
