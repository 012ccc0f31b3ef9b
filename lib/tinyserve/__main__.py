"""`python -m tinyserve` is the `tinyserve` command."""
import sys

from .cli import main

sys.exit(main())
