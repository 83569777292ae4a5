"""TODO(nn): _dropout."""

__all__: list[str] = []
