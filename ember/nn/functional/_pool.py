"""TODO(nn): _pool."""

__all__: list[str] = []
