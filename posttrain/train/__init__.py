"""Policy training: the RL loop, the policy update, checkpoints and base models."""
