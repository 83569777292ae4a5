"""TODO(nn): dropout layers."""

__all__: list[str] = []
