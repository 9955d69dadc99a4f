"""Per-run limits: the pool's maxima, and a job's requests clamped to them (STYLE.md item 11)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Limits for one snippet run. A pool's `Limits` are maxima: jobs may ask for less, never more."""

    timeout_s: float = 30.0  # wall clock, from handing the job over to the result; kills the group
    cpu_s: float = 60.0  # RLIMIT_CPU on the snippet's process (all its threads)
    memory_mb: int = 4096  # cgroup memory.max for the run (where the host lets us)
    gpu_memory_fraction: float = 0.45  # torch.cuda.set_per_process_memory_fraction, in the child
    max_procs: int = 512  # cgroup pids.max: counts threads too (torch starts one per core)
    max_output_bytes: int = 256 * 1024  # per stream; the rest is drained, dropped, marked truncated
    max_file_mb: int = 64  # RLIMIT_FSIZE: the largest file the snippet may write
    network: bool = False  # False: a fresh network namespace (loopback only) where the OS allows
    cold_start_s: float = 60.0  # extra wall/CPU time for `fresh_process` jobs (a cold `import torch`)

    def clamp(self, requested: dict | None) -> tuple[Limits, list[str]]:
        """Apply a job's overrides, never above these maxima; return (limits, notes on what changed)."""
        notes: list[str] = []
        values = dataclasses.asdict(self)
        kinds = {
            f.name: {"float": float, "int": int}.get(str(f.type), float) for f in dataclasses.fields(self)
        }
        for key, want in (requested or {}).items():
            if key not in values:
                notes.append(f"unknown limit {key!r} ignored")
                continue
            top = values[key]
            if key == "network":
                got = bool(want) and top
                if bool(want) and not top:
                    notes.append("network requested, but this pool runs snippets without network")
            else:
                try:
                    want = kinds[key](want)
                except (TypeError, ValueError):
                    notes.append(f"limit {key}={want!r} is not a number; kept {top}")
                    continue
                got = min(want, top) if want > 0 else top
                if want > top:
                    notes.append(f"{key}={want} clamped to this pool's maximum {top}")
            values[key] = got
        return Limits(**values), notes

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
