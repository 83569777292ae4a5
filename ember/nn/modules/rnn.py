"""TODO(nn): rnn layers."""

__all__: list[str] = []
