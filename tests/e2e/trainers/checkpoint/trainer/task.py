"""A trainer that checkpoints: STEPS deterministic steps of a toy model,
saving its state every second and when mlengine asks it to stop (SIGTERM:
a preemption), and resuming from its checkpoint in a later attempt. Its
result (printed, and written to <job-dir>/result.txt) is the same however
often it was interrupted.

    python -m trainer.task --job-dir gs://B/P [--steps 40] [--step-seconds 0.1]
"""
import argparse
import os
import sys
import time

from mlengine import gcs, interruption


def step(state):
    # A toy "training step": deterministic, and every step matters.
    w = state["w"]
    state["w"] = (w * 1103515245 + 12345 + state["step"]) % 2147483648
    state["step"] += 1
    return state


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    args = parser.parse_args()

    notice = interruption.install()
    attempt = interruption.attempt()
    state = interruption.load()
    if state is None:
        state = {"step": 0, "w": 1}
        print(f"attempt {attempt}: starting at step 0", flush=True)
    else:
        print(f"attempt {attempt}: resumed from step {state['step']}", flush=True)
    last_save = time.monotonic()
    while state["step"] < args.steps:
        time.sleep(args.step_seconds)
        step(state)
        print(f"step {state['step']}", flush=True)
        if notice.requested or time.monotonic() - last_save >= 1.0:
            interruption.save(state)
            last_save = time.monotonic()
        if notice.requested:
            print(f"attempt {attempt}: preempted at step {state['step']}, checkpoint saved", flush=True)
            return 0
    print(f"result {state['w']}", flush=True)
    with gcs.open(args.job_dir.rstrip("/") + "/result.txt", "w") as f:
        f.write(f"{state['w']}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
