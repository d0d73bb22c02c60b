"""`python3 -m bringup.probes`: the node-side entry point (see node.py for the protocol)."""

import sys

from bringup.probes.node import main

sys.exit(main(sys.argv[1:]))
