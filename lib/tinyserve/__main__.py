"""`python -m tinyserve` is the `tinyserve` command."""
import sys

from .tools.cli import main

sys.exit(main())
