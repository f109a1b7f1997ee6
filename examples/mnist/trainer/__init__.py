"""The MNIST walkthrough trainer (run as ``python3 -m trainer.task``)."""
