"""``python -m flows COMMAND ...`` runs the ``tmdsub`` command line (same commands and options)."""
import sys

from flows.cli import main

sys.exit(main())
