"""TODO(nn): loss layers."""

__all__: list[str] = []
