"""TODO(nn): _misc."""

__all__: list[str] = []
