"""TODO(nn): linear layers."""

__all__: list[str] = []
