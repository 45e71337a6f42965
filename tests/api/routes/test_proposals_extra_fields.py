"""The bodies of the proposal steps refuse a field they do not know (a misspelled optional
field, such as the answer to the rule's exception, would be ignored without notice)."""

from __future__ import annotations

import pytest
from api_factories import bearer

STEPS = {
    "confirm": {},
    "dismiss": {"reason": "Sem elementos suficientes."},
    "notify": {},
    "defence": {},
    "decision": {"accepted": False, "reason": "Defesa sem fundamento."},
    "decision-notification": {},
    "finalize": {"reason": "Sem defesa no prazo."},
}


class TestUnknownFields:
    @pytest.mark.parametrize("step", list(STEPS))
    def test_a_misspelled_field_is_a_422_naming_it(self, client, seeded, step: str) -> None:
        """'excecao_resposta' for 'exception_answer': 422 "campo não permitido", not ignored."""
        body = STEPS[step] | {"excecao_resposta": "salvo com autorização do usuário"}
        response = client.post(
            f"/api/v1/proposals/P-inexistente/{step}",
            json=body,
            headers=bearer(seeded["tokens"]["agent"]),
        )
        assert response.status_code == 422, response.text
        assert "'excecao_resposta': campo não permitido" in response.json()["error"]["message"]

    @pytest.mark.parametrize("step", list(STEPS))
    def test_the_known_fields_pass(self, client, seeded, step: str) -> None:
        """The same bodies without the stray field reach the lookup (404: no such proposal)."""
        response = client.post(
            f"/api/v1/proposals/P-inexistente/{step}",
            json=STEPS[step],
            headers=bearer(seeded["tokens"]["agent"]),
        )
        assert response.status_code == 404, response.text

    def test_generate_refuses_an_unknown_field(self, client, seeded) -> None:
        """'municipio' beside 'municipality' is refused by name."""
        response = client.post(
            "/api/v1/proposals/generate",
            json={"municipality": "4314902", "municipio": "4314902"},
            headers=bearer(seeded["tokens"]["agent"]),
        )
        assert response.status_code == 422, response.text
        assert "'municipio': campo não permitido" in response.json()["error"]["message"]
