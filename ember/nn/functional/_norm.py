"""TODO(nn): _norm."""

__all__: list[str] = []
