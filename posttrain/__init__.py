"""posttrain: RL post-training across hundreds of verifiable domains."""
