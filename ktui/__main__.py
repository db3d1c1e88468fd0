"""Package entry: python -m ktui."""
import sys

from ktui.cli.main import main

sys.exit(main())
