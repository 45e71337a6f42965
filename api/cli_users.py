"""`pontual users ...` and `pontual devices ...`: accounts, roles and GPS devices."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from api.cli_db import cli_session

app = typer.Typer(
    help="Contas de usuário e papéis (admin, planner, agent, supervisor).", no_args_is_help=True
)
devices_app = typer.Typer(
    help="Dispositivos GPS: cada um com seu token, só envia posições do seu veículo.",
    no_args_is_help=True,
)

StandOption = Annotated[
    list[str] | None,
    typer.Option("--stand", help="Ponto do supervisor (repita para vários)."),
]
PasswordStdin = Annotated[
    bool, typer.Option("--password-stdin", help="Lê a senha da entrada padrão (uma linha).")
]


def _read_password(password_stdin: bool) -> str:
    if password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    password: str = typer.prompt("Senha", hide_input=True, confirmation_prompt="Repita a senha")
    return password


@app.command()
def create(
    username: Annotated[str, typer.Argument(help="Nome de usuário (login).")],
    role: Annotated[str, typer.Option(help="admin, planner, agent ou supervisor.")],
    name: Annotated[str | None, typer.Option(help="Nome completo.")] = None,
    stand: StandOption = None,
    password_stdin: PasswordStdin = False,
) -> None:
    """Cria uma conta (a senha é pedida, ou lida com --password-stdin)."""
    from api import accounts

    accounts.check_role(role)
    password = _read_password(password_stdin)
    with cli_session() as session:
        user = accounts.create_user(
            session=session,
            username=username,
            password=password,
            role=role,
            full_name=name,
            stand_ids=stand or [],
        )
        typer.echo(f"Usuário '{user.username}' criado com o papel {user.role}.")


@app.command("list")
def list_users() -> None:
    """Lista as contas: nome, papel, situação e pontos (supervisores)."""
    from sqlalchemy import select

    from api import accounts
    from db.accounts.models import User

    with cli_session() as session:
        users = session.scalars(select(User).order_by(User.username)).all()
        if not users:
            typer.echo("Nenhum usuário cadastrado (crie com: pontual users create).")
            return
        for user in users:
            state = "desativado" if user.disabled_at else "ativo"
            stands = accounts.user_stands(session=session, user_id=user.user_id)
            where = f"  pontos: {', '.join(stands)}" if stands else ""
            typer.echo(f"{user.username}\t{user.role}\t{state}{where}")


@app.command("set-role")
def set_role(
    username: Annotated[str, typer.Argument(help="Nome de usuário.")],
    role: Annotated[str, typer.Argument(help="admin, planner, agent ou supervisor.")],
    stand: StandOption = None,
) -> None:
    """Muda o papel (e os pontos de um supervisor); os tokens do usuário são revogados."""
    from api import accounts

    with cli_session() as session:
        user = accounts.set_role(session=session, username=username, role=role, stand_ids=stand)
        typer.echo(f"Usuário '{user.username}' agora tem o papel {user.role}.")


@app.command()
def disable(username: Annotated[str, typer.Argument(help="Nome de usuário.")]) -> None:
    """Desativa a conta e revoga seus tokens (o histórico de auditoria permanece)."""
    from api import accounts

    with cli_session() as session:
        accounts.disable_user(session=session, username=username)
        typer.echo(f"Usuário '{username}' desativado; tokens revogados.")


@app.command()
def passwd(
    username: Annotated[str, typer.Argument(help="Nome de usuário.")],
    password_stdin: PasswordStdin = False,
) -> None:
    """Define uma nova senha; os tokens do usuário são revogados."""
    from api import accounts

    password = _read_password(password_stdin)
    with cli_session() as session:
        accounts.set_password(session=session, username=username, password=password)
        typer.echo(f"Senha de '{username}' alterada; tokens revogados.")


@devices_app.command("add")
def add_device(
    vehicle_id: Annotated[str, typer.Argument(help="Veículo (prefixo) do dispositivo.")],
    label: Annotated[str | None, typer.Option(help="Descrição (modelo, telefone etc.).")] = None,
) -> None:
    """Registra um dispositivo e imprime seu token UMA vez (guarde-o; só o hash é salvo)."""
    from sqlalchemy import select

    from api import accounts
    from db.fleet.models import Vehicle

    with cli_session() as session:
        device, token = accounts.create_device(session=session, vehicle_id=vehicle_id, label=label)
        known = session.scalar(select(Vehicle.vehicle_id).where(Vehicle.vehicle_id == vehicle_id))
        typer.echo(f"Dispositivo {device.device_id} do veículo {device.vehicle_id} registrado.")
        if known is None:
            typer.echo(f"aviso: o veículo {vehicle_id} ainda não está no cadastro da frota.")
        typer.echo("Token (mostrado só agora; use como Bearer ou como 'id' no OsmAnd/Traccar):")
        typer.echo(token)


@devices_app.command("list")
def list_devices() -> None:
    """Lista os dispositivos: id, veículo, situação e descrição (nunca o token)."""
    from sqlalchemy import select

    from db.accounts.models import Device

    with cli_session() as session:
        devices = session.scalars(select(Device).order_by(Device.device_id)).all()
        if not devices:
            typer.echo("Nenhum dispositivo (registre com: pontual devices add VEHICLE_ID).")
            return
        for device in devices:
            state = "revogado" if device.revoked_at else "ativo"
            typer.echo(f"{device.device_id}\t{device.vehicle_id}\t{state}\t{device.label or ''}")


@devices_app.command("revoke")
def revoke_device(device_id: Annotated[int, typer.Argument(help="Id do dispositivo.")]) -> None:
    """Revoga o token de um dispositivo (as posições já recebidas permanecem)."""
    from api import accounts

    with cli_session() as session:
        device = accounts.revoke_device(session=session, device_id=device_id)
        typer.echo(f"Dispositivo {device.device_id} ({device.vehicle_id}) revogado.")
