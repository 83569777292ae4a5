"""TODO(nn): pooling layers."""

__all__: list[str] = []
