"""TODO(nn): _activation."""

__all__: list[str] = []
