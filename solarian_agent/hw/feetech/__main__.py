"""``python -m solarian_agent.hw.feetech COMMAND``: see :mod:`solarian_agent.hw.feetech.cli`."""

import sys

from solarian_agent.hw.feetech.cli import main

if __name__ == "__main__":
    sys.exit(main())
