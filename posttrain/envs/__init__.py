"""Environments: episodes of messages and tool calls between a policy and a task.

`schema.py` and `tools.py` are the tools and their JSON schemas, `base.py` the `Environment` protocol,
`ToolEnv`, `SingleTurnEnv` and scripted runs, `example.py` a small key-value environment. The tool-call
wire format is `posttrain.verify.tool_calls` (docs/architecture.md).
"""
