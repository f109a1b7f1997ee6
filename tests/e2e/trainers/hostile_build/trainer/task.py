"""Prints what the package's setup.py found at build time (trainer/leak.py)."""

import json

from trainer import leak

print("BUILD " + json.dumps(leak.FOUND), flush=True)
print("BUILD-DATA " + leak.DATA, flush=True)
