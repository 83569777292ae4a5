"""TODO(nn): conv layers."""

__all__: list[str] = []
