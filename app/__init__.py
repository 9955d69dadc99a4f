"""Pitfalls: a self-hosted troubleshooting app for PyTorch errors."""
