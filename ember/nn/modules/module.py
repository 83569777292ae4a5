"""TODO(nn): Module."""


class Module:
    pass
