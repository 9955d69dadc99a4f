"""HTTP layer: JSON API, HTML pages, worker protocol. Never imports torch."""
