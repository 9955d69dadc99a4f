"""The sandbox: runs snippets in warm, confined, single-use processes. Standard library and torch only.

How it fits together, one module per process (and what runs in it):

- the caller's process (`agent.py` for workers, the CLI for `verify`/`reproduce`/`doctor`):
  `pool.py` (`Pool.run(job) -> outcome`: slots, spares, queue bound), `forkserver_client.py`
  (starts the fork server, asks it for children; `ChildHandle` owns one child's socket, cgroup,
  run folder and status pipe), `collect.py` (watches one run: output, result, end, deadline),
  `capture.py` (output pipes, capped while streaming), `cgroups.py` (a cgroup per run).
- the fork server (`forkserver.py`): imported torch, never ran an op; forks children, reaps them,
  writes each one's end on its status pipe, kills whatever a finished run left behind.
- a sandbox child (`child.py`): confines itself (`isolate.py`: namespaces, read-only mounts,
  private /tmp, an unprivileged uid), warms up, runs ONE job (`execute.py`), reports, dies.
- `check.py`: `python -m app.sandbox.check` proves entries with a cold interpreter per snippet.

`contracts.py` holds what crosses these boundaries (Job, Limits, Outcome, the judging code) and
every default; `probe.py` finds out by attack which protections hold (`pitfalls doctor`).
"""
