"""A tuning trainer written for AI Platform, unchanged: ``import hypertune``
(cloudml-hypertune) and a free-text metric tag, as ai-platform-samples'
sklearn hp_tuning sample reports it. Its objective is -(x - 0.3)^2."""

import argparse

import hypertune

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, required=True)
args, _ = parser.parse_known_args()
score = -(args.x - 0.3) ** 2
hpt = hypertune.HyperTune()
hpt.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="Taxi Model Accuracy", metric_value=score,
                                        global_step=1000)
print("x=%s score=%s" % (args.x, score))
