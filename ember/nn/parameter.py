"""TODO(nn): Parameter and Buffer."""


class Parameter:
    pass


class Buffer:
    pass
