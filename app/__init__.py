"""Pitfalls: a self-hosted troubleshooting app for PyTorch errors.

How it fits together, following one paste and one press of Reproduce:

1. **Content.** `content/<category>/<slug>.toml` files are read and validated by `content.py` and
   synced into the database (`models.py`; schema by Alembic in `migrations/`, engine in `db.py`).
   `pitfalls serve` (`cli.py`) migrates and syncs, then builds the app (`main.create_app`) and starts
   local workers (`local_workers.py`).
2. **Search.** `GET/POST /api/search` (`web/api.py`) or the search page (`web/pages.py`) hands the
   paste to `search.Searcher`: `normalize.py` picks the lines that carry the error and sets volatile
   parts aside (paths, numbers, shapes); `search.py` scores them against every entry's signatures
   (an in-memory index rebuilt when the content changes, SQL through `search_store.py`) and says
   whether the best answer is confident. `evaluate.py` measures that on real pastes (`eval/`).
   A search that finds nothing confident is kept, normalised, for curators (`team/misses.py`).
3. **Reproduce.** `POST /api/entries/{slug}/reproduce` or the page's button goes through
   `web/queueing.queue_run` -> `runs.create_run`: one queued row per run (bounded queue, a share per
   client, identical waiting runs shared).
4. **Workers.** A worker (`sandbox/agent.py`, local or on a GPU box) long-polls
   `POST /api/worker/lease` (`web/workers.py` -> `runs.lease_run`), gets the job, runs each snippet
   in its warm pool (`sandbox/pool.py` -> fork server -> one confined child per snippet; see
   `app/sandbox/__init__.py`), heartbeats, and posts each outcome back (`web/workers.py` validates it
   against the outcome contract, then `runs.submit_result`). A worker that dies stops heartbeating:
   its lease expires and the run goes to another (`runs.expire_leases`).
5. **Back to the reader.** The entry page polls `/runs/{id}` (`web/pages.py`, data from
   `web/page_data.py`, HTML from `web/markup.py` and the templates via `web/templating.py`), or a
   client polls `GET /api/runs/{id}`, until both outcomes are in.

Boundaries: the web tier (`web/`, `team/`, everything outside `sandbox/`) never imports torch;
`sandbox/` uses only the standard library and torch, so a GPU box needs nothing else. Settings live in
`config.py` (`PITFALLS_*`), the sandbox's contracts and defaults in `sandbox/contracts.py`.
"""
