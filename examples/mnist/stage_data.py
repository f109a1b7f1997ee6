#!/usr/bin/env python3
"""Stages the walkthrough's data set: the 8x8 digits as digits.npz.

Builds ``digits.npz`` (x_train, y_train, x_test, y_test; images uint8 8x8
with values 0..16, labels int64; a stratified 80/20 split with a fixed
seed) from scikit-learn's bundled copy of the UCI handwritten digits, then

    stage_data.py gs://BUCKET/datasets/digits
        uploads it with ``$MLENGINE_BIN storage cp`` (default ``mlengine``)
        to gs://BUCKET/datasets/digits/digits.npz;
    stage_data.py --local DIR
        just writes DIR/digits.npz (no server needed).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

DATA_FILE = "digits.npz"
TEST_FRACTION = 0.2
SEED = 20240601


def build_arrays(seed=SEED, test_fraction=TEST_FRACTION):
    """The deterministic train/test split of sklearn's digits."""
    from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel
    from sklearn.model_selection import train_test_split  # pylint: disable=import-outside-toplevel

    digits = load_digits()
    images = digits.images.astype(np.uint8)  # (1797, 8, 8), values 0..16
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=test_fraction, random_state=seed, stratify=labels)
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def write_npz(path):
    arrays = build_arrays()
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)
    return arrays


def destination(uri):
    """gs://B/datasets/digits -> gs://B/datasets/digits/digits.npz."""
    if uri.endswith(".npz"):
        return uri
    return uri.rstrip("/") + "/" + DATA_FILE


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("destination", nargs="?",
                       help="gs://BUCKET/datasets/digits (digits.npz is uploaded there)")
    group.add_argument("--local", metavar="DIR", help="write DIR/digits.npz instead")
    args = parser.parse_args(argv)

    if args.local:
        os.makedirs(args.local, exist_ok=True)
        path = os.path.join(args.local, DATA_FILE)
        arrays = write_npz(path)
        print("wrote %s (%d train, %d test examples)" % (
            path, len(arrays["y_train"]), len(arrays["y_test"])), flush=True)
        return 0

    if not args.destination.startswith("gs://") or len(args.destination) <= len("gs://"):
        parser.error("destination must be a gs://BUCKET/... URI (or use --local DIR)")
    target = destination(args.destination)
    mlengine_bin = os.environ.get("MLENGINE_BIN") or "mlengine"
    if os.sep not in mlengine_bin and shutil.which(mlengine_bin) is None:
        print("ERROR: %r not found; put the mlengine CLI on PATH or set MLENGINE_BIN"
              % mlengine_bin, file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="stage-digits-") as tmp:
        path = os.path.join(tmp, DATA_FILE)
        arrays = write_npz(path)
        command = [mlengine_bin, "storage", "cp", path, target]
        print("uploading %d train / %d test examples: %s" % (
            len(arrays["y_train"]), len(arrays["y_test"]), " ".join(command)), flush=True)
        result = subprocess.run(command, check=False)
    if result.returncode != 0:
        print("ERROR: %s exited with status %d" % (command[0], result.returncode),
              file=sys.stderr)
        return result.returncode or 1
    print("staged %s" % target, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
