"""`python -m flows.cli …` (as `torchrun -m flows.cli train …` starts it): the same as the `stsgen` command."""

import sys

from flows.cli import main

if __name__ == "__main__":
    sys.exit(main())
