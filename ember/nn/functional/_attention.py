"""TODO(nn): _attention."""

__all__: list[str] = []
