"""TODO(nn): _loss."""

__all__: list[str] = []
