"""TODO(nn): _conv."""

__all__: list[str] = []
