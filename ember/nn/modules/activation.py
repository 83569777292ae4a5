"""TODO(nn): activation layers."""

__all__: list[str] = []
