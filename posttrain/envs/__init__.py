"""Environments: episodes of messages and tool calls between a policy and a task.

Wave 2 builds the `Environment` protocol, tools and the episode runner here (docs/architecture.md);
the tool-call wire format is `posttrain.verify.tool_calls`.
"""
