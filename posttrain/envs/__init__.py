"""Environments: episodes of messages and tool calls between a policy and a task.

`parse.py` is the tool-call wire format, `schema.py` and `tools.py` the tools and their JSON schemas,
`base.py` the `Environment` protocol, `ToolEnv`, `SingleTurnEnv` and scripted runs, `example.py` a small
key-value environment. The asyncio episode runner comes next (docs/architecture.md).
"""
