"""LLM backends: see ``base.py`` for the protocol and ``get_backend`` for the registry."""
