"""Repository-wide pytest setup: tests never touch the user's real cache directory."""

from __future__ import annotations

import os
import tempfile

# Set before ember reads its configuration, so every test (and every subprocess a test
# starts, which inherits the environment) uses a private cache root.
if "EMBER_TEST_KEEP_CACHE_DIR" not in os.environ:
    os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-test-cache-")
