"""Settings: every knob of the app, read from `PITFALLS_*` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .sandbox.contracts import WORKER_CONCURRENCY, WORKER_SPARE, Limits

_RUN = Limits()  # the per-snippet limits' defaults are the sandbox contract's: one source


class Settings(BaseSettings):
    """One typed, documented field per setting; the README's table is checked against this class."""

    model_config = SettingsConfigDict(env_prefix="PITFALLS_", extra="ignore")

    database_url: str = Field(
        "sqlite:///pitfalls.db",
        description="Database URL. Supported: SQLite "
        "(`sqlite:///path`, the embedded default) and PostgreSQL (`postgresql://user:pw@host/db`, "
        "needs the `postgres` extra; for several web replicas).",
    )
    content_dir: Path = Field(Path("content"), description="Folder of entry files synced into the database.")
    sync_on_start: bool = Field(True, description="Migrate and sync `content_dir` when the server starts.")
    base_url: str = Field(
        "http://127.0.0.1:8000", description="Public address, used in links printed by the CLI."
    )

    # search
    max_query_bytes: int = Field(
        1_000_000, description="Largest accepted search text; longer pastes get 413."
    )
    max_body_bytes: int = Field(
        4_000_000, description="Largest accepted request body, refused with 413 before it is read."
    )
    confident_score: float = Field(
        0.8, description="Signature similarity (0-1) at or above which a match can be confident."
    )
    confident_margin: float = Field(
        0.05,
        description="...and by which it must lead any entry that matched a different "
        "signature (chosen on the real-paste evaluation set).",
    )
    search_limit: int = Field(10, description="Results returned by a search.")

    # runs and workers
    local_workers: int = Field(
        1, description="Worker processes `serve` starts on this machine (0: remote workers only)."
    )
    worker_concurrency: int = Field(
        WORKER_CONCURRENCY, description="Snippets a local worker runs at once (its pool size)."
    )
    worker_spare: int = Field(WORKER_SPARE, description="Warmed children each local worker keeps ready.")
    worker_token: str = Field(
        "", description="Shared secret remote workers send; empty: remote workers refused."
    )
    queue_max: int = Field(64, description="Runs waiting at most; more get 503 with Retry-After.")
    queue_per_client: int = Field(
        8,
        description="Waiting runs one client (signed-in user, else address) may hold; "
        "more get 429 (0: no limit).",
    )
    lease_s: int = Field(
        30, description="Seconds a worker holds a run without a heartbeat before it is requeued."
    )
    max_attempts: int = Field(3, description="Times a run is leased before it is marked crashed.")

    # limits for one snippet (sent with each job, clamped by the worker); defaults from sandbox/contracts.py
    run_timeout_s: float = Field(
        _RUN.timeout_s, description="Wall-clock limit per snippet; the process group is killed."
    )
    run_cpu_s: int = Field(int(_RUN.cpu_s), description="CPU-time limit per snippet (RLIMIT_CPU).")
    run_memory_mb: int = Field(
        _RUN.memory_mb, description="RAM limit per snippet (cgroup v2 memory.max where allowed)."
    )
    run_gpu_memory_fraction: float = Field(
        _RUN.gpu_memory_fraction, description="Share of GPU memory one snippet may allocate."
    )
    run_max_procs: int = Field(
        _RUN.max_procs, description="Processes per snippet (cgroup v2 pids.max where allowed)."
    )
    run_max_output_bytes: int = Field(
        _RUN.max_output_bytes,
        description="stdout/stderr kept per snippet; the rest is dropped and marked truncated.",
    )
    run_max_file_mb: int = Field(
        _RUN.max_file_mb, description="Largest file a snippet may write (RLIMIT_FSIZE)."
    )
    run_network: bool = Field(
        _RUN.network,
        description="Let snippets use the network (off: a private network namespace where allowed).",
    )

    # pages
    htmx_local: bool = Field(
        True,
        description="Serve htmx from this server (works offline); false loads it from "
        "the jsDelivr CDN with a pinned SRI hash.",
    )

    # team (missed searches, feedback, team content, sign-in)
    team_content_dir: Path | None = Field(
        "",
        validate_default=True,
        description="The team's own folder, synced beside `content_dir`: "
        "entries (`<category>/<slug>.toml`), notes on any entry (`notes/<slug>.md`), "
        "drafts (`drafts/`).",
    )
    record_misses: bool = Field(
        True,
        description="Record searches that end without a confident match (their normalised "
        "error lines only: no paths, user names or numbers).",
    )
    misses_retention_days: int = Field(
        90, description="Missed searches not seen for this many days are pruned."
    )
    trusted_proxies: str = Field(
        "",
        description="Comma-separated addresses or CIDRs of the authenticating proxy; the "
        "user headers are honoured only from these (empty: never).",
    )
    user_header: str = Field(
        "X-Forwarded-User", description="Header the trusted proxy sets to the signed-in user."
    )
    groups_header: str = Field(
        "X-Forwarded-Groups",
        description="Header the trusted proxy sets to the user's groups (comma-separated).",
    )
    curator_groups: str = Field(
        "curators", description="Groups (comma-separated) whose members curate: misses, feedback, drafts."
    )
    admin_token: str = Field(
        "",
        description="Token that signs in as the curator `admin` (small teams without a proxy); empty: off.",
    )
    read_requires_sign_in: bool = Field(
        False, description="Pages and the API need a signed-in user (reading is open when false)."
    )
    reproduce_requires_sign_in: bool = Field(
        False, description="Reproduce needs a signed-in user in `reproduce_groups` or a curator."
    )
    reproduce_groups: str = Field(
        "",
        description="Groups (comma-separated) allowed to Reproduce when it needs sign-in "
        "(empty: every signed-in user).",
    )

    @field_validator("team_content_dir", mode="before")
    @classmethod
    def _unset_folder(cls, v: object) -> object:
        return None if v is None or (isinstance(v, str) and not v.strip()) else v

    def sqlite_path(self) -> Path | None:
        """The database file when the URL is SQLite, else None."""
        prefix = "sqlite:///"
        return Path(self.database_url[len(prefix) :]) if self.database_url.startswith(prefix) else None

    def limits(self) -> dict[str, Any]:
        """Per-snippet limits sent with each job."""
        return {
            "timeout_s": self.run_timeout_s,
            "cpu_s": self.run_cpu_s,
            "memory_mb": self.run_memory_mb,
            "gpu_memory_fraction": self.run_gpu_memory_fraction,
            "max_procs": self.run_max_procs,
            "max_output_bytes": self.run_max_output_bytes,
            "max_file_mb": self.run_max_file_mb,
            "network": self.run_network,
        }
