"""CLI commands that run snippets: reproduce, verify, doctor (they import torch, via the sandbox)."""
