"""CLI commands that run snippets through a local warm pool: verify, reproduce, doctor.

The pool's fork server imports torch in its own process; this one only talks to it.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .cli_common import current_settings, err, out, ready_engine
from .config import Settings
from .content import ContentError, LoadedEntry, load_dir
from .runs import PARTS, spec_snippets
from .sandbox.contracts import Job, blank, died_by_signal, make_job, ran_out_of_time, verdict

if TYPE_CHECKING:
    from .sandbox.pool import Pool


def _pool(settings: Settings, size: int | None = None) -> Pool:
    from .sandbox.contracts import Limits
    from .sandbox.pool import Pool

    limits = Limits(**settings.limits())  # the server's per-snippet limits are this pool's maxima
    size = size or max(1, min(settings.worker_concurrency, os.cpu_count() or 1))
    return Pool(size=size, spare=min(settings.worker_spare, size), limits=limits)


def _jobs(e: LoadedEntry) -> dict[str, Job | None]:
    """Each part's job, as the server's run of the entry would lease it (None: no such snippet)."""
    requires = e.spec.requires
    return {
        part: None
        if s is None
        else make_job(
            s["code"],
            expect=s["expect"],
            check=s["check"],
            requires=requires.as_contract(),
            fresh_process=requires.fresh_process,
        )
        for part, s in spec_snippets(e.spec).items()
    }


def run_entry(pool: Pool, e: LoadedEntry) -> dict[str, Any]:
    """Both snippets of one entry, and a verdict: pass, fail or skipped (never skipped as passed).

    A part that did not behave as declared runs once more (`retried` says why the first run failed):
    a teardown race, a stalled rendezvous or which rank's error arrives first in a multi-process
    snippet on a loaded machine is not the entry's fault (such a snippet can pass every run on one
    machine and fail once on another), but a second failure fails it; a pass on the second run is listed.
    """
    jobs = _jobs(e)
    results = {
        part: pool.run(job) if job else blank("skipped", "no fixed snippet") for part, job in jobs.items()
    }
    retried = {}
    for part, job in jobs.items():
        once = results[part]
        if job and once.get("expected") is False:
            retried[part] = died_by_signal(once) or ran_out_of_time(once) or str(once.get("reason"))
            results[part] = pool.run(job)
    status, reason = verdict(results["broken"], results["fixed"])
    if status == "pass" and not e.spec.requires.reproducible:
        reason = "diagnostic ran"
    if retried:
        first = "; ".join(f"{part}: {why}" for part, why in retried.items())
        reason = f"{reason} (run twice, the first time {first})"
    return {
        "slug": e.slug,
        "category": e.category,
        "status": status,
        "reason": reason,
        "retried": retried,
        **results,
    }


def verify(
    category: Annotated[str | None, typer.Option(help="Only this category")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON report")] = False,
    slug: Annotated[list[str] | None, typer.Option(help="Only these entries")] = None,
    store: Annotated[bool, typer.Option(help="Record the outcomes, so the entry pages show them")] = True,
) -> None:
    """Run every entry's snippets and check them against their expectations; exit 1 on any mismatch."""
    settings = current_settings()
    try:
        entries = load_dir(settings.content_dir)
    except ContentError as exc:
        err.print(f"[red]content error:[/red] {exc}")
        raise typer.Exit(2) from None
    entries = [
        e for e in entries if (not category or e.category == category) and (not slug or e.slug in slug)
    ]
    if not entries:
        err.print("no entries selected")
        raise typer.Exit(2)
    report = []
    with (
        _pool(settings) as pool,
        Progress(
            TextColumn("verify"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=err,
            disable=as_json and not err.is_terminal,
        ) as bar,
    ):
        task = bar.add_task("", total=len(entries))
        with ThreadPoolExecutor(pool.size) as ex:
            for row in ex.map(lambda e: run_entry(pool, e), entries):
                report.append(row)
                bar.update(task, advance=1, description=f"{row['status']:7} {row['slug']}")
    summary = {s: sum(r["status"] == s for r in report) for s in ("pass", "fail", "skipped")}
    if store:
        _store(settings, report)
    if as_json:
        out.print_json(json.dumps({"entries": report, "summary": summary}, default=str))
    else:
        table = Table("status", "entry", "broken", "fixed", "reason", box=None)
        colour = {"pass": "green", "fail": "red", "skipped": "yellow"}
        for r in sorted(report, key=lambda r: (r["status"] != "fail", r["category"], r["slug"])):
            table.add_row(
                f"[{colour[r['status']]}]{r['status']}[/]",
                f"{r['category']}/{r['slug']}",
                r["broken"].get("outcome"),
                r["fixed"].get("outcome"),
                escape((r["reason"] or "")[:120]),  # (a snippet's message is no markup: `[/__w/...]`)
            )
        out.print(table)
        out.print(f"{summary['pass']} passed, {summary['fail']} failed, {summary['skipped']} skipped")
        for r in report:
            if r["retried"]:  # CI logs keep the races, so one that grows common gets noticed
                out.print(f"[yellow]run twice[/]: {r['category']}/{r['slug']}: {escape(r['reason'])}")
        for r in report:  # again below the summary: a CI log keeps only its tail
            if r["status"] == "fail":
                out.print(
                    f"[red]failed[/]: {r['category']}/{r['slug']}: {escape(r['reason'])}", soft_wrap=True
                )
                for part in PARTS:
                    o = r[part]
                    if o.get("expected") is False:
                        said = f"{o.get('exc_type') or ''} {(o.get('message') or '')[:300]}".strip()
                        out.print(f"  {part}: {o.get('outcome')} {said}", soft_wrap=True, markup=False)
    if summary["fail"]:
        raise typer.Exit(1)


def _store(settings: Settings, report: list[dict[str, Any]]) -> None:
    """Record verify's outcomes as a run's would be, so pages show them instead of "not yet run"."""
    from sqlmodel import Session

    from . import runs
    from .models import Entry

    with ready_engine(settings) as engine, Session(engine) as session:
        for row in report:
            entry = session.get(Entry, row["slug"])
            if entry is None:
                continue
            snippets = runs.entry_snippets(entry)
            for part in PARTS:
                runs.remember(session, slug=row["slug"], part=part, snippet=snippets[part], result=row[part])
        session.commit()


def _panel(part: str, o: dict[str, Any]) -> Panel:
    head = f"[bold]{o.get('outcome')}[/bold]"
    if o.get("exc_type"):
        head += f"  {escape(o['exc_type'])}"
    body = [head, escape((o.get("message") or "")[:1500])]
    for w in o.get("warnings", [])[:3]:
        body.append(f"[yellow]{w.get('category')}[/yellow]: {escape(w.get('message', '')[:300])}")
    if o.get("stdout"):
        body.append("[dim]stdout[/dim]\n" + escape(o["stdout"][-1500:]))
    body.append(
        f"[dim]{o.get('device')} · torch {o.get('torch_version')} · {o.get('duration_ms')} ms · "
        f"{'as expected' if o.get('expected') else 'NOT as expected' if o.get('expected') is False else ''}[/dim]"
    )
    style = "green" if o.get("expected") else "red" if o.get("expected") is False else "yellow"
    return Panel("\n".join(b for b in body if b), title=part, border_style=style, expand=True)


def reproduce(slug: str) -> None:
    """Run one entry's broken and fixed snippets here and show both outcomes side by side."""
    settings = current_settings()
    try:
        entry = next((e for e in load_dir(settings.content_dir) if e.slug == slug), None)
    except ContentError as exc:
        err.print(f"[red]content error:[/red] {exc}")
        raise typer.Exit(2) from None
    if entry is None:
        err.print(f"no entry {slug!r}; try `pitfalls search`")
        raise typer.Exit(2)
    with _pool(settings, size=1) as pool:
        row = run_entry(pool, entry)
    out.rule(f"[bold]{entry.spec.title}[/bold]")
    grid = Table.grid(expand=True, padding=(0, 1))
    grid.add_column(ratio=1)
    grid.add_column(ratio=1)
    grid.add_row(_panel("broken", row["broken"]), _panel("fixed", row["fixed"]))
    out.print(grid)
    if row["status"] == "fail":
        raise typer.Exit(1)


def doctor(as_json: Annotated[bool, typer.Option("--json", help="Print one JSON report")] = False) -> None:
    """What this machine offers the sandbox: device, torch, which limits are enforced, and which
    protections hold (each one found out by running an attacking snippet, not assumed)."""
    from .sandbox.probe import probe

    settings = current_settings()
    db = settings.sqlite_path()
    with _pool(settings, size=1) as pool:
        info = pool.info()
        protections = probe(
            pool,
            code_dir=str(Path(__file__).resolve().parents[1]),
            database=str(Path(db).resolve()) if db else None,
            home=str(Path.home()),
        )
    if as_json:
        out.print_json(json.dumps({**info, "protections": protections}, default=str))
        return
    table = Table("limit", "enforced", "how", box=None)
    for name, v in info["limits_enforced"].items():
        table.add_row(name, "yes" if v["enforced"] else "[yellow]no[/yellow]", v["how"])
    shield = Table("protection (probed)", "enforced", "evidence", box=None)
    for name, v in protections.items():
        shield.add_row(name, "yes" if v["enforced"] else "[yellow]no[/yellow]", v["how"])
    out.print(f"device: {info['device']} · torch {info['torch_version']} · GPUs: {info['gpus']}")
    out.print(f"database: {settings.database_url} · content: {Path(settings.content_dir).resolve()}")
    out.print(table)
    out.print(shield)
