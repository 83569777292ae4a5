"""TODO(nn): _sparse."""

__all__: list[str] = []
