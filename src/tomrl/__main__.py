"""``python -m tomrl`` is the same as the ``tomrl`` command."""

import sys

from tomrl.cli import main

sys.exit(main())
