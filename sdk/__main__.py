"""``python -m orbitmq`` is the same as the ``orbitmq`` command."""

import sys

from orbitmq.cli import main

if __name__ == "__main__":
    sys.exit(main())
