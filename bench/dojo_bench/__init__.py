"""The AgentDojo comparison's parts (bench/agentdojo_compare.py): `defenses` and `report` need only hilbert;
`agent` needs agentdojo (installed in its own venv, .venv-agentdojo)."""
