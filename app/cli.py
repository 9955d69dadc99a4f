"""`pitfalls` command line: serve, sync, search, explain, reproduce, verify, worker, coverage, backup,
misses, feedback."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markdown import Markdown
from rich.table import Table

from . import cli_runs
from .cli_common import current_settings, err, out, ready_engine

cli = typer.Typer(
    help="Pitfalls: search PyTorch errors, read the fix, reproduce it on a real worker.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@cli.command()
def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: Annotated[int | None, typer.Option(help="Local worker processes (default: setting)")] = None,
) -> None:
    """Migrate, sync content/ and serve the app, with a local worker pool."""
    import uvicorn

    from .main import create_app

    settings = current_settings()
    if workers is not None:
        settings.local_workers = workers
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    app = create_app(settings, worker_url=url if settings.local_workers else None)
    # long polls from workers must not hold a stop: in-flight requests get 2 s
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=2)


@cli.command()
def sync(
    force: Annotated[
        bool, typer.Option(help="Allow removing most entries (an emptied content folder)")
    ] = False,
) -> None:
    """Load content/ into the database (idempotent; a bad file changes nothing)."""
    from . import content
    from .db import make_engine, migrate

    settings = current_settings()
    migrate(settings)
    engine = make_engine(settings)
    try:
        report = content.sync(engine, settings.content_dir, force=force, team=settings.team_content_dir)
    except content.ContentError as exc:
        err.print(f"[red]content error:[/red] {exc}")
        raise typer.Exit(2) from None
    finally:
        engine.dispose()
    out.print(f"synced {settings.content_dir}: {report}")


Server = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="PITFALLS_SERVER",
        help="A team's Pitfalls server (URL) to ask instead of a local knowledge base",
    ),
]


class _Local:
    """This checkout's knowledge base (migrated and synced on first use)."""

    def __init__(self) -> None:
        self.settings = current_settings()
        self.base_url = self.settings.base_url
        if not self.settings.content_dir.is_dir():
            # outside the repository: say what to do, and leave no database file behind
            err.print(
                f"[red]No knowledge base here[/red] (no {self.settings.content_dir}/ folder). Run this inside "
                "the Pitfalls repository, set PITFALLS_CONTENT_DIR, or ask your team's server with "
                "--server URL (or PITFALLS_SERVER).",
                soft_wrap=True,
            )
            raise typer.Exit(2)
        self._open = ExitStack()
        self.engine = self._open.enter_context(ready_engine(self.settings))

    def close(self) -> None:
        self._open.close()

    def search(self, text: str) -> dict[str, Any]:
        from .search import QueryError, Searcher

        try:
            return Searcher.from_settings(self.engine, self.settings).search(text).as_dict()
        except QueryError as exc:
            err.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from None

    def entry(self, slug: str) -> dict[str, Any]:
        from sqlmodel import Session

        from .models import Entry

        with Session(self.engine) as session:
            e = session.get(Entry, slug)
            assert e is not None, f"{slug} came from a search of this database"
            return {
                "slug": e.slug,
                "title": e.title,
                "category": e.category,
                "summary": e.summary,
                "fix": e.fix,
            }


class _Remote:
    """A team's server, over its JSON API (needs neither torch nor the content here)."""

    def __init__(self, url: str) -> None:
        import httpx

        self.base_url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.base_url, timeout=30)

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        import httpx

        try:
            r = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            err.print(f"[red]cannot reach {self.base_url}:[/red] {exc}")
            raise typer.Exit(2) from None
        if r.status_code != 200:
            detail = r.json().get("detail") if "json" in r.headers.get("content-type", "") else r.text[:200]
            err.print(f"[red]{self.base_url} answered {r.status_code}:[/red] {detail}")
            raise typer.Exit(2)
        body: dict[str, Any] = r.json()  # both endpoints answer a JSON object
        return body

    def search(self, text: str) -> dict[str, Any]:
        return self._call("POST", "/api/search", json={"q": text})

    def entry(self, slug: str) -> dict[str, Any]:
        return self._call("GET", f"/api/entries/{slug}")


@contextmanager
def _kb(server: str | None) -> Iterator[_Local | _Remote]:
    """The knowledge base asked (a local database or a team's server), closed when the block ends."""
    kb = _Remote(server) if server else _Local()
    try:
        yield kb
    finally:
        kb.close()


def _read_stdin() -> str:
    return sys.stdin.buffer.read().decode("utf-8", errors="replace")


def _tee_stdin(limit: int = 4_000_000) -> str:
    """Pass the program's output through as it comes, and keep its last `limit` bytes to explain."""
    kept = bytearray()
    for line in iter(sys.stdin.buffer.readline, b""):
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
        kept += line
        if len(kept) > 2 * limit:
            del kept[:-limit]
    return bytes(kept[-limit:]).decode("utf-8", errors="replace")


@cli.command()
def search(
    text: Annotated[str, typer.Argument(help="Error text ('-' reads stdin)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the API's JSON")] = False,
    server: Server = None,
) -> None:
    """Search the knowledge base for an error message."""
    with _kb(server) as kb:
        result = kb.search(_read_stdin() if text == "-" else text)
    if as_json:
        out.print_json(json.dumps(result))
        return
    table = Table("score", "entry", "category", "matched", box=None)
    for h in result["results"]:
        table.add_row(
            f"{h['score']:.2f}", f"[bold]{h['title']}[/bold]\n{h['slug']}", h["category"], h["matched"][:100]
        )
    out.print(
        "[green]confident match[/green]" if result["confident"] else "[yellow]no confident match[/yellow]"
    )
    out.print(table)


@cli.command()
def explain(
    server: Server = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Don't pass the input through")] = False,
) -> None:
    """Explain the error at the end of a program's output: `python train.py 2>&1 | pitfalls explain`.

    The output passes through as the program runs; at its end, the best entry, its fix and its page.
    """
    with _kb(server) as kb:  # fail early (no knowledge base, bad server), before the program's output
        _explain(kb, quiet)


def _explain(kb: _Local | _Remote, quiet: bool) -> None:
    text = _read_stdin() if quiet else _tee_stdin()
    if not text.strip():
        err.print("[yellow]Nothing to explain: the input was empty.[/yellow]")
        raise typer.Exit(1)
    result = kb.search(text)
    hits = result["results"]
    if not result["confident"] or not hits:
        out.print("[yellow]No entry matches this error well.[/yellow]")
        if hits:
            out.print("Closest, for what it's worth:")
            for h in hits[:3]:
                out.print(f"  - {h['title']} ({h['category']}) {kb.base_url}/e/{h['slug']}")
        raise typer.Exit(1)
    best = hits[0]
    entry = kb.entry(best["slug"])
    out.rule(f"[bold]{entry['title']}[/bold]  [dim]({entry['category']}, score {best['score']:.2f})[/dim]")
    out.print(f"[dim]matched:[/dim] {best['matched']}")
    out.print(Markdown(entry["summary"]))
    out.print(Markdown("## Fix\n\n" + entry["fix"]))
    out.print(f"\nMore, and a live reproduction: {kb.base_url}/e/{entry['slug']}")


@cli.command("eval")
def eval_(
    files: Annotated[list[Path], typer.Argument(help="JSONL case files or folders (e.g. eval/wild)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print figures and misses as JSON")] = False,
    show_misses: Annotated[bool, typer.Option("--misses/--no-misses", help="List each miss")] = True,
    thresholds: Annotated[bool, typer.Option(help="Also print what each confidence threshold gives")] = False,
    save: Annotated[Path | None, typer.Option(help="Write each case's verdict to this JSON file")] = None,
    against: Annotated[
        Path | None, typer.Option(help="List the cases whose verdict changed since a file written by --save")
    ] = None,
) -> None:
    """Score search on real pastes: top-1 confident-and-right, top-3, wrong-and-confident, abstention.

    Writing entries: `--save before.json` first, then `--against before.json` shows what they changed."""
    from sqlmodel import Session, select

    from .evaluate import EvalFileError, changes, evaluate, load_cases, threshold_table, verdicts
    from .models import Entry
    from .search import Searcher

    try:
        cases = load_cases(files)
        before = json.loads(against.read_text(encoding="utf-8")) if against else None
        if before is not None and not isinstance(before, dict):
            raise EvalFileError(f"{against}: not a file written by --save")
    except (OSError, ValueError) as exc:
        err.print(f"[red]{exc}[/red]", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    settings = current_settings()
    with ready_engine(settings) as engine:
        with Session(engine) as session:
            known = set(session.exec(select(Entry.slug)).all())
        searcher = Searcher.from_settings(engine, settings)
        report = evaluate(cases, searcher.search, known)
        if thresholds and not as_json:  # (--json prints no table)
            searcher.confident_score = 0.0  # every other part of the rule still applies
            unthresholded = evaluate(cases, searcher.search, known)
    figures = report.figures()
    if save:
        save.write_text(json.dumps(verdicts(report), indent=0), encoding="utf-8")
    moved = changes(before, report) if before is not None else None
    misses = report.misses() if show_misses else []
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "figures": figures,
                    "unknown_slugs": report.unknown_slugs,
                    "changed": moved,
                    "misses": [
                        {
                            "id": o.case.id,
                            "verdict": o.verdict,
                            "ok": list(o.case.ok),
                            "got": o.ranked[:3],
                            "score": o.score,
                            "source": o.case.source,
                        }
                        for o in misses
                    ],
                }
            )
        )
        return
    for o in misses:
        first = o.case.text.strip().splitlines()[-1][:110]
        out.print(
            f"[yellow]{o.verdict:15}[/yellow] {o.case.id:14} want {','.join(o.case.ok) or '(abstain)'}"
            f"  got {o.ranked[0] if o.ranked else '-'} {o.score:.2f}\n{'':16}[dim]{first}[/dim]",
            highlight=False,
            soft_wrap=True,
        )
    for case_id, slugs in report.unknown_slugs.items():
        err.print(f"[red]{case_id}: unknown entry {', '.join(slugs)}[/red]")
    for way, colour in (("better", "green"), ("worse", "red")):
        for case_id, was, now in (moved or {}).get(way, []):
            out.print(f"[{colour}]{way:6}[/{colour}] {case_id:14} {was} -> {now}", highlight=False)
    if thresholds:
        table = Table("threshold", "confident", "precision", "top-1 right", "wrong+confident", box=None)
        for row in threshold_table(unthresholded, [x / 100 for x in range(40, 96, 5)]):
            table.add_row(
                f"{row['threshold']:.2f}",
                str(row["confident"]),
                f"{row['precision']:.1%}",
                f"{row['top1_confident_right']:.1%}",
                f"{row['wrong_confident']:.1%}",
            )
        out.print(table)
    out.print(
        f"{figures['cases']} cases, {figures['covered']} with an entry ({figures['coverage']:.1%})\n"
        f"  top-1 confident and right  {figures['top1_confident_right']:.1%}  (of cases with an entry)\n"
        f"  top-3                      {figures['top3']:.1%}  (of cases with an entry)\n"
        f"  wrong and confident        {figures['wrong_confident']:.1%}  (of all cases)\n"
        f"  abstained on uncovered     {figures['abstain_uncovered']:.1%}\n"
        f"  confident answers right    {figures['confident_precision']:.1%}",
        highlight=False,
    )


@cli.command()
def misses(
    limit: Annotated[int, typer.Option(help="Show at most this many")] = 50,
    draft: Annotated[int | None, typer.Option(help="Write a draft entry file for this miss (its id)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON")] = False,
) -> None:
    """Searches that ended without a confident match, most frequent first; --draft ID writes a draft
    entry file for one into the team content folder (drafts/)."""
    import getpass

    from sqlmodel import Session

    from .team import drafts
    from .team import misses as team_misses

    settings = current_settings()
    with ready_engine(settings) as engine, Session(engine) as session:
        if draft is not None:
            try:
                path = drafts.create(session, settings.team_content_dir, draft, f"{getpass.getuser()} (cli)")
            except drafts.DraftError as exc:
                err.print(f"[red]{exc}[/red]")
                raise typer.Exit(2) from None
            out.print(f"draft written: {path}")
            return
        rows = [team_misses.public(m) for m in team_misses.listing(session, settings, limit=limit)]
    if as_json:
        out.print_json(json.dumps(rows))
        return
    table = Table("id", "seen", "last seen", "error (normalised)", "draft", box=None)
    for m in rows:
        table.add_row(
            str(m["id"]), str(m["count"]), m["last_seen"][:10], m["template"], m["draft_path"] or ""
        )
    out.print(table)
    out.print(f"{len(rows)} missed searches" + ("" if settings.record_misses else " (recording is off)"))


@cli.command()
def feedback(
    export: Annotated[
        Path | None,
        typer.Option(help="Write the misrouted pastes as evaluation cases (JSONL, as `pitfalls eval` reads)"),
    ] = None,
) -> None:
    """Feedback per entry ("solved it" / "wrong entry"); --export FILE writes the misrouted pastes."""
    from sqlmodel import Session

    from .team import feedback as team_feedback

    settings = current_settings()
    with ready_engine(settings) as engine, Session(engine) as session:
        if export is not None:
            n = team_feedback.export(session, export)
            out.print(f"wrote {n} misrouted pastes to {export} (check them with `pitfalls eval {export}`)")
            return
        table = Table("entry", "solved it", "wrong entry", box=None)
        for c in team_feedback.counts(session):
            table.add_row(c["slug"], str(c["solved"]), str(c["wrong"]))
    out.print(table)


@cli.command()
def coverage(content_dir: Path = Path("content")) -> None:
    """Entries per category, and which seed-inventory lines each covers; exit 1 if any is uncovered."""
    from .categories import CATEGORIES
    from .content import ContentError, load_dir, seed_inventory

    try:
        entries = load_dir(content_dir)
    except ContentError as exc:
        err.print(f"[red]content error:[/red] {exc}")
        raise typer.Exit(2) from None
    table = Table("category", "entries", "seed lines covered", box=None)
    covered: dict[str, list[str]] = {}
    for cat in CATEGORIES:
        mine = [e for e in entries if e.category == cat]
        ids = sorted({s for e in mine for s in e.spec.seeds})
        for e in mine:
            for s in e.spec.seeds:
                covered.setdefault(s, []).append(e.slug)
        table.add_row(cat, str(len(mine)), ", ".join(ids))
    out.print(table)
    inventory = seed_inventory(content_dir)
    missing = [line for line in inventory if line["id"] not in covered]
    unknown = sorted(set(covered) - {line["id"] for line in inventory})
    out.print(f"{len(entries)} entries; {len(inventory) - len(missing)}/{len(inventory)} seed lines covered")
    for line in missing:
        out.print(f"[red]uncovered[/red] {line['id']}: {line['text'][:100]}")
    for s in unknown:
        out.print(f"[red]unknown seed id[/red] {s} in {', '.join(covered[s])}")
    if missing or unknown:
        raise typer.Exit(1)


@cli.command()
def worker(
    server: Annotated[str, typer.Option(help="URL of the Pitfalls web service")],
    token: Annotated[str, typer.Option(envvar="PITFALLS_WORKER_TOKEN", help="The service's worker token")],
    concurrency: int = 2,
    spare: int = 2,
) -> None:
    """Run a worker that pulls jobs from a Pitfalls service (the team's GPU box)."""
    from .sandbox import agent

    # the agent owns logging, signals and a clear exit on a refused token
    raise typer.Exit(
        agent.main(
            ["--server", server, "--token", token, "--concurrency", str(concurrency), "--spare", str(spare)]
        )
    )


@cli.command("copy-db")
def copy_db(
    target: Annotated[str, typer.Argument(help="URL of the new database, e.g. postgresql://user:pw@host/db")],
) -> None:
    """Copy this database's run history and results to a new database (moving from SQLite to PostgreSQL).

    The target is migrated and synced from the content folders; runs, results, workers, feedback,
    missed searches and team actions are copied with their ids. Stop the server first.
    """
    from . import content, transfer
    from .db import make_engine, migrate

    settings = current_settings()
    into = settings.model_copy(update={"database_url": target})
    migrate(settings)
    migrate(into)
    source, dest = make_engine(settings), make_engine(into)
    try:
        content.sync(dest, settings.content_dir, team=settings.team_content_dir)
        counts = transfer.copy_history(source, dest)
    except (content.ContentError, transfer.TransferError) as exc:
        err.print(f"[red]not copied:[/red] {exc}")
        raise typer.Exit(2) from None
    finally:
        source.dispose()
        dest.dispose()
    out.print(
        "copied "
        + ", ".join(f"{n} {name}" for name, n in counts.items())
        + f" to {dest.url.render_as_string(hide_password=True)}"
    )


@cli.command()
def backup(path: Path) -> None:
    """Take a consistent online copy of the SQLite database (safe while the server runs)."""
    import sqlite3

    settings = current_settings()
    db = settings.sqlite_path()
    if db is None:
        err.print("backup copies SQLite databases; for another database use its own tools (pg_dump)")
        raise typer.Exit(2)
    if not db.exists():
        err.print(f"no database at {db}")
        raise typer.Exit(2)
    path.parent.mkdir(parents=True, exist_ok=True)
    src, dst = sqlite3.connect(db), sqlite3.connect(path)
    with dst:
        src.backup(dst)
    src.close()
    dst.close()
    out.print(f"backed up {db} to {path}")


# the commands that run snippets through a local warm pool live beside their helpers
for command in (cli_runs.verify, cli_runs.reproduce, cli_runs.doctor):
    cli.command()(command)


def main() -> None:
    cli()
