"""TODO(nn): _linear."""

__all__: list[str] = []
