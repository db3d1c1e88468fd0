"""Package entry: python -m ktui."""
import sys

from ktui.cli import main

sys.exit(main())
