"""`python -m app.devstack COMMAND`."""

import sys

from app.devstack.commands import main

sys.exit(main())
