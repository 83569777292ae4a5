"""TODO(nn): normalization layers."""

__all__: list[str] = []
