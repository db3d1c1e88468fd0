import sys

from ktui.worker.ahead.helper import main

sys.exit(main())
