"""TODO(nn): container layers."""

__all__: list[str] = []
