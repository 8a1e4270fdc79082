"""One module per ``seglog`` subcommand; each exposes ``register(subparsers)``."""
