"""``python -m ember``: the ``ember`` command line (``ember.cli``)."""

import sys

from .cli import main

if __name__ == "__main__":  # importing the module (an API reference walking the package) runs nothing
    sys.exit(main())
