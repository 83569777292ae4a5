"""TODO(nn): transformer layers."""

__all__: list[str] = []
