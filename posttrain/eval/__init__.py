"""Evaluation: per-domain scores of a policy on held-out tasks, and base-vs-trained comparisons."""
