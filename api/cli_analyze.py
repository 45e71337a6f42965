"""`pontual analyze`: the file contract, in memory, no database."""


def analyze() -> None:
    """Analisa pings contra pontos e frota e grava os arquivos de saída."""
    raise NotImplementedError
