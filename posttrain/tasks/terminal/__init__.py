"""Terminal tasks: Harbor-layout task packages, built offline once and snapshotted, played by a shell agent.

`package.py` (task.toml / task.yaml -> `TerminalPackage`), `dockerfile.py` (the Dockerfile subset),
`build.py` (build once, snapshot, fork per episode), `shell.py` (`TerminalEnv`, the grading),
`family.py` (family kind `terminal`), `validate.py` (oracle 1, nothing 0, deterministic tests),
`agentbench.py` (AgentBench OS tasks converted into packages). docs/terminal.md.
"""
