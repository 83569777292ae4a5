"""TODO(nn): sparse layers."""

__all__: list[str] = []
