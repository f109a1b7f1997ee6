"""Never runs: the package's dependency cannot be installed."""
print("needs_tfds trainer ran (it should not have)", flush=True)
