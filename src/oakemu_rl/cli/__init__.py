"""The `oakemu-rl` command line."""
