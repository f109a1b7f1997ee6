"""A trainer whose package ships its own numpy: it must start cold."""
import numpy

print("numpy", numpy.__version__, flush=True)
