"""Measure search on real pastes: how often a user's paste lands on the right entry.

An evaluation case is one JSON line: `{"id", "text", "source", "ok": [slugs], "wanted", ...}`.
`ok` lists every entry that explains the paste; an empty `ok` means the knowledge base has no entry
for it (`wanted` says which is missing), and the right answer is to abstain (`confident: false`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .search import SearchResult


class EvalFileError(ValueError):
    """A case file can't be read; the message names the file, the line and the problem."""


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    ok: tuple[str, ...]
    source: str = ""
    wanted: str | None = None

    @property
    def covered(self) -> bool:
        return bool(self.ok)


@dataclass
class Outcome:
    """What search answered for one case, judged."""

    case: Case
    confident: bool
    ranked: list[str]
    score: float

    @property
    def right(self) -> bool:  # confident and the first answer explains it
        return self.confident and bool(self.ranked) and self.ranked[0] in self.case.ok

    @property
    def top3(self) -> bool:
        return any(s in self.case.ok for s in self.ranked[:3])

    @property
    def wrong_confident(self) -> bool:
        return self.confident and not self.right

    @property
    def verdict(self) -> str:
        if self.case.covered:
            if self.right:
                return "right"
            return "wrong-confident" if self.confident else ("unsure-top3" if self.top3 else "missed")
        return "wrong-confident" if self.confident else "abstained"


def _case(row: object, where: str) -> Case:
    if not isinstance(row, dict):
        raise EvalFileError(f"{where}: expected a JSON object")
    text, ok = row.get("text"), row.get("ok", [])
    if not isinstance(text, str) or not text.strip():
        raise EvalFileError(f"{where}: field text: must be a non-empty string")
    if not isinstance(ok, list) or not all(isinstance(s, str) for s in ok):
        raise EvalFileError(f"{where}: field ok: must be a list of entry slugs")
    return Case(str(row.get("id") or where), text, tuple(ok), str(row.get("source") or ""), row.get("wanted"))


def load_cases(paths: Iterable[Path]) -> list[Case]:
    """Read `.jsonl` files (a folder means every `.jsonl` in it, sorted)."""
    cases: list[Case] = []
    for path in paths:
        files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
        if not files:
            raise EvalFileError(f"{path}: no .jsonl files")
        for f in files:
            try:
                lines = f.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                raise EvalFileError(f"{f}: {exc}") from None
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise EvalFileError(f"{f}:{n}: not JSON ({exc.msg})") from None
                cases.append(_case(row, f"{f}:{n}"))
    return cases


@dataclass
class Report:
    outcomes: list[Outcome]
    unknown_slugs: dict[str, list[str]] = field(default_factory=dict)  # case id -> slugs not in the KB

    def _share(self, part: Callable[[Outcome], bool], of: Callable[[Outcome], bool]) -> float:
        pool = [o for o in self.outcomes if of(o)]
        return sum(map(part, pool)) / len(pool) if pool else 0.0

    def figures(self) -> dict[str, float | int]:
        def covered(o: Outcome) -> bool:
            return o.case.covered

        def uncovered(o: Outcome) -> bool:
            return not o.case.covered

        def every(o: Outcome) -> bool:
            return True

        def confident(o: Outcome) -> bool:
            return o.confident

        return {
            "cases": len(self.outcomes),
            "covered": sum(map(covered, self.outcomes)),
            "coverage": self._share(covered, every),
            "top1_confident_right": self._share(lambda o: o.right, covered),
            "top3": self._share(lambda o: o.top3, covered),
            "wrong_confident": self._share(lambda o: o.wrong_confident, every),
            "abstain_uncovered": self._share(lambda o: not o.confident, uncovered),
            "confident_precision": self._share(lambda o: o.right, confident),
        }

    def misses(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.verdict not in ("right", "abstained")]


def evaluate(cases: list[Case], search: Callable[[str], SearchResult], known: set[str]) -> Report:
    outcomes, unknown = [], {}
    for case in cases:
        if bad := [s for s in case.ok if s not in known]:
            unknown[case.id] = bad
        result = search(case.text)
        ranked = [h.slug for h in result.results]
        score = result.results[0].score if result.results else 0.0
        outcomes.append(Outcome(case, result.confident, ranked, score))
    return Report(outcomes, unknown)


def answer_hidden(cases: list[Case], search: Callable[..., SearchResult]) -> float:
    """Of the pastes that have an entry, the share that still get a confident answer when their
    entries are hidden: a confident wrong answer. Pastes of errors the knowledge base lacks meet the
    same search, so this is how often a gap is answered with confidence (measured on worked-on cases,
    without the held-out sample)."""
    covered = [c for c in cases if c.ok]
    wrong = sum(1 for c in covered if search(c.text, hide=frozenset(c.ok)).confident)
    return wrong / len(covered) if covered else 0.0


def verdicts(report: Report) -> dict[str, str]:
    """Each case's verdict by id: what `pitfalls eval --save` keeps to compare a later run with."""
    return {o.case.id: o.verdict for o in report.outcomes}


# from worst to best: a confident wrong answer misleads; a miss only fails to help
RANK = {"wrong-confident": 0, "missed": 1, "unsure-top3": 2, "right": 3, "abstained": 3}


def changes(before: dict[str, str], report: Report) -> dict[str, list[tuple[str, str, str]]]:
    """Cases whose verdict changed since `before`: (id, was, now), split into better and worse.

    What a content author runs after writing an entry: did it take pastes that belong elsewhere?
    """
    moved: dict[str, list[tuple[str, str, str]]] = {"better": [], "worse": []}
    for case_id, now in verdicts(report).items():
        was = before.get(case_id)
        if was in RANK and RANK[now] != RANK[was]:
            moved["better" if RANK[now] > RANK[was] else "worse"].append((case_id, was, now))
    return moved


def threshold_table(report: Report, thresholds: Iterable[float]) -> list[dict[str, float]]:
    """What each confidence threshold would give on these cases (for choosing the setting).

    `report` must come from a search that applies every other part of the confidence rule but
    no threshold (`confident_score=0`): an answer is then confident at `t` when it was confident
    there and scored at least `t`.
    """
    rows = []
    covered = sum(o.case.covered for o in report.outcomes) or 1
    for t in thresholds:
        conf = [o for o in report.outcomes if o.confident and o.ranked and o.score >= t]
        right = [o for o in conf if o.ranked[0] in o.case.ok]
        rows.append(
            {
                "threshold": t,
                "confident": len(conf),
                "precision": len(right) / len(conf) if conf else 1.0,
                "top1_confident_right": len(right) / covered,
                "wrong_confident": (len(conf) - len(right)) / max(len(report.outcomes), 1),
            }
        )
    return rows


def choose_threshold(
    report: Report, *, precision: float = 0.97, grid: Iterable[float] | None = None
) -> float:
    """The lowest threshold whose confident answers are right at least `precision` of the time."""
    grid = sorted(grid or [x / 100 for x in range(40, 100)])
    for row in threshold_table(report, grid):
        if row["precision"] >= precision:
            return row["threshold"]
    return grid[-1]


def cross_validate(
    report: Report, *, rounds: int = 200, precision: float = 0.97, seed: int = 0
) -> dict[str, float]:
    """Choose the threshold on a random half of the cases, measure it on the other half.

    Says how far the chosen threshold can be trusted on pastes it was not chosen on.
    """
    import random

    rng = random.Random(seed)
    outs = report.outcomes
    precisions, rights, wrongs, thresholds = [], [], [], []
    for _ in range(rounds):
        shuffled = rng.sample(outs, len(outs))
        fit, held = Report(shuffled[: len(outs) // 2]), Report(shuffled[len(outs) // 2 :])
        t = choose_threshold(fit, precision=precision)
        row = threshold_table(held, [t])[0]
        thresholds.append(t)
        precisions.append(row["precision"])
        rights.append(row["top1_confident_right"])
        wrongs.append(row["wrong_confident"])
    ordered = sorted(precisions)
    return {
        "threshold_median": sorted(thresholds)[rounds // 2],
        "held_out_precision_mean": sum(precisions) / rounds,
        "held_out_precision_p5": ordered[int(0.05 * rounds)],
        "held_out_top1_mean": sum(rights) / rounds,
        "held_out_wrong_confident_mean": sum(wrongs) / rounds,
    }
