"""``python -m orbitmq`` is the same as the ``orbitmq`` command."""

import sys

from orbitmq.cli import main

sys.exit(main())
