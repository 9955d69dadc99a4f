"""A worker that pulls reproduce jobs from a Pitfalls server over HTTP (issue 3, item 4).

    python -m app.sandbox.agent --server URL --token T [--concurrency N] [--spare N]

Standard library and torch only (torch through the pool's fork server), so it runs on a bare GPU
box. Protocol (the server implements exactly this):
- `POST /api/worker/lease` {"worker": {...}, "wait_s": 20} -> 200 job | 204 nothing yet | 401;
- `POST /api/worker/runs/{id}/heartbeat` {"lease"} every ~lease_s/3 -> 200 | 409 lease lost;
- `POST /api/worker/runs/{id}/result` {"lease", "part", "result"} once per part -> 200 | 409.
Network errors are retried with backoff. SIGTERM: stop leasing, finish the jobs in hand, exit;
a second SIGTERM (or Ctrl-C) abandons them (their leases expire and the server requeues them).
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import random
import signal
import socket
import sys
import threading
import time
import urllib.parse
from types import FrameType
from typing import Any, TypedDict

from .contracts import WORKER_CONCURRENCY, WORKER_SPARE, Limits, Outcome, blank, make_job
from .execute import finish
from .pool import Pool, PoolClosed

log = logging.getLogger("pitfalls.agent")


class AuthError(RuntimeError):
    """The server refused our token."""


class WorkerInfo(TypedDict):
    """What this worker tells the server with each lease request."""

    id: str
    device: str
    torch_version: str | None
    gpus: int
    hostname: str
    concurrency: int


class _Client:
    """JSON over HTTP(S) with a bearer token; in-flight long polls can be aborted."""

    def __init__(self, server: str, token: str):
        self.url = urllib.parse.urlsplit(server.rstrip("/"))
        if self.url.scheme not in ("http", "https") or not self.url.hostname:
            raise ValueError(f"not an http(s) URL: {server!r}")
        self.host: str = self.url.hostname
        self.token = token
        self._live: set[http.client.HTTPConnection] = set()
        self._lock = threading.Lock()

    def post(
        self, path: str, body: dict[str, Any], *, timeout: float, abortable: bool = False
    ) -> tuple[int, object]:
        """POST JSON; return (status, the JSON body, None if none). Network trouble raises OSError."""
        cls = http.client.HTTPSConnection if self.url.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.host, self.url.port, timeout=timeout)
        if abortable:
            with self._lock:
                self._live.add(conn)
        try:
            conn.request(
                "POST",
                self.url.path + path,
                body=json.dumps(body).encode(),
                headers={
                    "Authorization": f"Bearer {self.token}",
                    "Content-Type": "application/json",
                    "User-Agent": "pitfalls-agent/1",
                },
            )
            resp = conn.getresponse()
            data = resp.read()
        except (http.client.HTTPException, ValueError) as exc:
            raise OSError(f"bad HTTP exchange: {exc}") from exc
        finally:
            conn.close()
            with self._lock:
                self._live.discard(conn)
        try:
            payload = json.loads(data) if data else None
        except ValueError:
            payload = None
        return resp.status, payload

    def abort(self) -> None:
        """Break the long polls in flight (on shutdown)."""
        with self._lock:
            live = list(self._live)
        for conn in live:
            try:
                if conn.sock is not None:
                    conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Backoff:
    def __init__(self, first: float = 0.5, most: float = 30.0):
        self.first, self.most, self.delay = first, most, first

    def next(self) -> float:
        delay, self.delay = self.delay, min(self.most, self.delay * 2)
        return delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self.delay = self.first


class Agent:
    """Leases jobs, runs each part in the pool, heartbeats, posts the results."""

    def __init__(
        self,
        client: _Client,
        pool: Pool,
        worker: WorkerInfo,
        *,
        stop: threading.Event,
        abandon: threading.Event,
        wait_s: float,
    ):
        self.client, self.pool, self.worker = client, pool, worker
        self.stop, self.abandon, self.wait_s = stop, abandon, wait_s
        self.auth_error: str | None = None
        self.done = 0
        self._cancels: set[threading.Event] = set()

    def cancel_all(self) -> None:
        """Abandon the jobs in hand: their children are killed, nothing more is posted."""
        for cancel in list(self._cancels):
            cancel.set()

    def loop(self) -> None:
        backoff = _Backoff()
        while not self.stop.is_set():
            try:
                status, body = self.client.post(
                    "/api/worker/lease",
                    {"worker": self.worker, "wait_s": self.wait_s},
                    timeout=self.wait_s + 15,
                    abortable=True,
                )
            except OSError as exc:
                if self.stop.is_set():
                    return
                delay = backoff.next()
                log.warning("lease failed (%s); retrying in %.1fs", exc, delay)
                self.stop.wait(delay)
                continue
            if status in (401, 403):
                self.auth_error = f"the server refused the token (HTTP {status}); check --token"
                self.stop.set()
                return
            if status == 204:
                backoff.reset()
                continue
            if status != 200 or not isinstance(body, dict) or "run_id" not in body:
                delay = backoff.next()
                log.warning("lease answered HTTP %s; retrying in %.1fs", status, delay)
                self.stop.wait(delay)
                continue
            backoff.reset()
            try:
                self.job(body)
            except PoolClosed:
                return
            except Exception:  # one bad job must not end the worker
                log.exception("run %s failed in the agent", body.get("run_id"))

    def job(self, lease: dict[str, Any]) -> None:
        """Run a leased job's parts and post each outcome (`lease`: the server's JSON)."""
        run_id, token = lease["run_id"], lease["lease"]
        lease_s = float(lease.get("lease_s") or 60)
        cancel, beat_stop = threading.Event(), threading.Event()
        self._cancels.add(cancel)
        watch = threading.Thread(
            target=self._heartbeat,
            args=(run_id, token, lease_s, cancel, beat_stop),
            name=f"pitfalls-heartbeat-{run_id}",
            daemon=True,
        )
        watch.start()
        log.info("run %s: leased", run_id)
        try:
            for part in ("broken", "fixed"):
                snippet = (lease.get("snippets") or {}).get(part)
                if snippet is None:
                    outcome = finish(
                        blank(
                            "skipped",
                            f"no {part} snippet",
                            device=self.worker["device"],
                            torch_version=self.worker["torch_version"],
                        ),
                        stdout="",
                        stderr="",
                        truncated=False,
                        check=None,
                        expect=None,
                    )
                else:
                    job = make_job(
                        snippet["code"],
                        expect=snippet.get("expect"),
                        check=snippet.get("check"),
                        requires=lease.get("requires"),
                        fresh_process=bool(lease.get("fresh_process")),
                        limits=lease.get("limits"),
                    )
                    outcome = self.pool.run(job, cancel=cancel)
                if cancel.is_set() or self.abandon.is_set():
                    log.warning(
                        "run %s: abandoned (%s)", run_id, "lease lost" if cancel.is_set() else "shutdown"
                    )
                    return
                if not self._post_result(run_id, token, part, outcome, lease_s, cancel):
                    return
            self.done += 1
            log.info("run %s: done", run_id)
        finally:
            beat_stop.set()
            self._cancels.discard(cancel)

    def _heartbeat(
        self, run_id: int, token: str, lease_s: float, cancel: threading.Event, beat_stop: threading.Event
    ) -> None:
        every = max(0.2, lease_s / 3)
        while not beat_stop.wait(every):
            if self.abandon.is_set():
                cancel.set()
                return
            try:
                status, _ = self.client.post(
                    f"/api/worker/runs/{run_id}/heartbeat", {"lease": token}, timeout=10
                )
            except OSError as exc:
                log.warning("run %s: heartbeat failed (%s)", run_id, exc)
                continue
            if status == 409:
                log.warning("run %s: lease lost", run_id)
                cancel.set()
                return

    def _post_result(
        self, run_id: int, token: str, part: str, outcome: Outcome, lease_s: float, cancel: threading.Event
    ) -> bool:
        """Deliver one part; retry network errors until the lease must have expired."""
        backoff, give_up = _Backoff(), time.monotonic() + max(30.0, 2 * lease_s)
        body = {"lease": token, "part": part, "result": outcome}
        while True:
            try:
                status, _ = self.client.post(f"/api/worker/runs/{run_id}/result", body, timeout=30)
                if status == 200:
                    return True
                if status == 409:
                    log.warning("run %s: lease lost before the %s result was stored", run_id, part)
                    cancel.set()
                    return False
                why = f"HTTP {status}"
                if 400 <= status < 500 and status != 429:
                    log.error("run %s: the server rejected the %s result (%s)", run_id, part, why)
                    return False
            except OSError as exc:
                why = str(exc)
            if time.monotonic() > give_up or self.abandon.is_set():
                log.error("run %s: could not deliver the %s result (%s); giving up", run_id, part, why)
                return False
            delay = backoff.next()
            log.warning("run %s: posting %s result failed (%s); retrying in %.1fs", run_id, part, why, delay)
            self.abandon.wait(delay)


def serve(
    server: str,
    token: str,
    *,
    concurrency: int = WORKER_CONCURRENCY,
    spare: int = WORKER_SPARE,
    stop_event: threading.Event | None = None,
    abandon_event: threading.Event | None = None,
    pool: Pool | None = None,
    limits: Limits | None = None,
    wait_s: float = 20,
) -> int:
    """Pull and run jobs until `stop_event` is set; return how many runs were completed.

    Raises AuthError when the server refuses the token. With `pool`, uses (and leaves open) that pool.
    """
    stop, abandon = stop_event or threading.Event(), abandon_event or threading.Event()
    client = _Client(server, token)
    own = pool is None
    pool = pool or Pool(size=concurrency, spare=spare, limits=limits)
    try:
        pool.start(wait=False)
        facts = pool.info()
        worker: WorkerInfo = {
            "id": f"{socket.gethostname()}-{os.getpid()}",
            "device": facts["device"],
            "torch_version": facts["torch_version"],
            "gpus": facts["gpus"],
            "hostname": socket.gethostname(),
            "concurrency": concurrency,
        }
        log.info(
            "worker %s: %s, torch %s, %d GPU(s), serving %s",
            worker["id"],
            worker["device"],
            worker["torch_version"],
            worker["gpus"],
            server,
        )
        agent = Agent(client, pool, worker, stop=stop, abandon=abandon, wait_s=wait_s)
        threads = [
            threading.Thread(target=agent.loop, name=f"pitfalls-agent-{i}", daemon=True)
            for i in range(max(1, concurrency))
        ]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            if stop.wait(0.2) or abandon.is_set():
                stop.set()
                client.abort()  # long polls end now; jobs in hand finish (or abandon on a second signal)
                for t in threads:
                    while t.is_alive() and not abandon.is_set():
                        t.join(0.2)
                if abandon.is_set():
                    agent.cancel_all()
                    for t in threads:
                        t.join(5)
                break
        if agent.auth_error:
            raise AuthError(agent.auth_error)
        return agent.done
    finally:
        if own:
            pool.close()


def _parse_limits(pairs: list[str]) -> Limits:
    """`KEY=VALUE` pairs over the default maxima."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(Limits)}
    values: dict[str, Any] = {}  # each converted to its field's type below
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in fields:
            raise ValueError(f"--limit {pair!r}: expected KEY=VALUE with KEY one of {', '.join(fields)}")
        kind = str(fields[key].type)
        values[key] = (
            value.lower() in ("1", "true", "yes")
            if kind == "bool"
            else (int if kind == "int" else float)(value)
        )
    return Limits(**values)


def _die_with(parent: int, stop: threading.Event, abandon: threading.Event) -> None:
    """A server's local worker must not outlive it, even a `kill -9`'d one: once the parent is gone
    (we are re-parented), abandon the jobs in hand and close the pool, so nothing is left behind."""
    while not abandon.is_set():
        if os.getppid() != parent:
            log.warning("the server (pid %d) is gone: stopping", parent)
            stop.set()
            abandon.set()
            return
        time.sleep(0.25)


def _log_thread_death(a: threading.ExceptHookArgs) -> None:
    log.error("thread %s died", a.thread.name if a.thread else "?", exc_info=a.exc_value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.sandbox.agent", description=__doc__.split("\n")[0])
    parser.add_argument("--server", required=True, help="the Pitfalls server, e.g. http://pitfalls:8000")
    parser.add_argument(
        "--token",
        default=os.environ.get("PITFALLS_WORKER_TOKEN"),
        help="worker token (or PITFALLS_WORKER_TOKEN)",
    )
    parser.add_argument(
        "--parent-pid",
        type=int,
        default=None,
        help="exit (abandoning jobs in hand) when this process is gone: a server's local workers",
    )
    parser.add_argument("--concurrency", type=int, default=WORKER_CONCURRENCY, help="runs at once")
    parser.add_argument("--spare", type=int, default=WORKER_SPARE, help="warmed children kept ready")
    parser.add_argument("--wait", type=float, default=20, help="long-poll seconds per lease request")
    parser.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="raise or lower a maximum per run, e.g. timeout_s=60, memory_mb=8192, network=0 "
        "(jobs' own limits are clamped to these)",
    )
    args = parser.parse_args(argv)
    try:
        limits = _parse_limits(args.limit)
    except ValueError as exc:
        parser.error(str(exc))
    if not args.token:
        parser.error("--token is required (or set PITFALLS_WORKER_TOKEN)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # a background thread (pool replenisher, heartbeat, parent watch) that dies says so in the log
    threading.excepthook = _log_thread_death
    stop, abandon = threading.Event(), threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            log.warning("second %s: abandoning the jobs in hand", signal.Signals(signum).name)
            abandon.set()
        else:
            log.info("%s: finishing the jobs in hand, then exiting", signal.Signals(signum).name)
            stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.parent_pid:
        threading.Thread(
            target=_die_with, args=(args.parent_pid, stop, abandon), name="parent-watch", daemon=True
        ).start()
    try:
        done = serve(
            args.server,
            args.token,
            concurrency=args.concurrency,
            spare=args.spare,
            stop_event=stop,
            abandon_event=abandon,
            wait_s=args.wait,
            limits=limits,
        )
    except AuthError as exc:
        print(f"pitfalls worker: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"pitfalls worker: {exc}", file=sys.stderr)
        return 2
    log.info("stopped after %d run(s)", done)
    return 0


if __name__ == "__main__":
    sys.exit(main())
