"""ember's environment: configuration, the persistent cache store, the debug log.

* ``config``  -- typed keys from defaults, ``pyproject.toml`` ``[tool.ember]``, ``ember.toml`` and
  ``EMBER_*`` variables (``config.get("autotune.level")``, ``config.effective()``).
* ``store``   -- one SQLite database (WAL) in the cache root with namespaces and artifact files
  (``store.get_store().get_json("autotune/...", key)``).
* ``log``     -- the debug log (``EMBER_DEBUG_LOG``), categories compilation / autotune /
  performance / fusion through ``logging``.
* ``commands`` -- ``ember config`` and ``ember cache list|show|clear`` (imported by the CLI).
"""

from __future__ import annotations

from . import config, log, store
from .config import ConfigWarning
from .store import Store, StoreWarning, get_store

__all__ = ["config", "log", "store", "ConfigWarning", "Store", "StoreWarning", "get_store"]
