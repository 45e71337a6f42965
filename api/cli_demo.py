"""`pontual demo`: the main job on the embedded default."""


def demo() -> None:
    """Carrega os dados reais, gera mapas e um resumo."""
    raise NotImplementedError
