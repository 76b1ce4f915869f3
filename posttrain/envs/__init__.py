"""Environments: episodes of messages and tool calls between a policy and a task.

Wave 2 builds the `Environment` protocol, tools and the episode runner here (docs/architecture.md);
for now the package holds the tool-call wire format (`parse.py`).
"""
