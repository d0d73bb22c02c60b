"""`python3 -m bringup.node`: the node-side entry point (see node.py for the protocol)."""

import sys

from bringup.node.protocol import main

sys.exit(main(sys.argv[1:]))
