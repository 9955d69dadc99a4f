"""Run snippets. Standard library and torch only: this package must run on a bare GPU box."""
