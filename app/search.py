"""Find the entry that explains a pasted error.

1. `normalize.extract` picks the lines that carry the error and sets volatile parts aside.
2. Signature match: an in-memory inverted index over the normalised signatures (built from the
   database once per content generation) gathers the signatures that share the paste's rarest
   tokens; each is rescored by IDF-weighted overlap, the signature's recall weighing most.
3. Free text ("dataloader hangs"): BM25 over title, summary and body (FTS5 on SQLite, the same BM25
   over PostgreSQL's full-text index: `search_store.py`).
4. Confident only when a signature matches well, or free text names one entry clearly.

User text never reaches a full-text engine as syntax: queries are built from our own `[a-z0-9_]`
tokens, each quoted.
"""

from __future__ import annotations

import heapq
import math
import re
import threading
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from operator import itemgetter
from typing import Any

from rapidfuzz import fuzz, process
from sqlalchemy.engine import Engine

from .config import Settings
from .normalize import (
    PLAIN_BESIDE_ERROR,
    WORD,
    Normalized,
    called_function,
    clean,
    extract,
    missing_attribute,
    normalize,
)
from .search_store import Reader, SearchStore

AUX_WEIGHT = 0.3  # quoted names matter, but less than the words around them
MAX_LINES = 4  # error lines of a paste (its lines, variants as one) that gather candidates, best first
POSTINGS_BUDGET = 4000  # signature ids visited per search, rarest tokens first
CANDIDATES = 40  # rescored precisely
GENERIC_WORDS = 8  # up to this many words, a signature with quoted names is a template for them
QUOTED_MISMATCH = 0.7
QUOTED_MISMATCH_LONG = 0.85  # longer signatures: the quoted names still carry part of the meaning
PARTIAL_MASS = 12.0  # IDF weight a fragment needs to stand on its own (~3 rare words)
PARTIAL_CAP = 0.9  # a fragment, however distinctive, is not the whole message
TYPO_MIN = 6  # shortest word we try to correct
TYPO_CUTOFF = 86  # rapidfuzz ratio a correction needs
TYPO_WEIGHT = 0.7  # a corrected word counts for less than one typed right
TIE = 0.03
TIE_MATCH_WEIGHT = 0.5  # how much a tied entry's better match counts against the rest of the paste
QUOTED = "_q_"  # a quoted name's placeholder
WHOLE_THEN_PROSE = 0.9  # a line holding a whole signature in a sentence of the user's
TRUNCATED = 0.85  # a line that is a signature's first words, cut off (a log viewer's width, a title)
SOURCE_GAIN = 0.25  # what the source line that raised an error can add to the error's own match ...
SOURCE_REST = 0.8  # ... unless the error line holds this share of what the signature says beyond it
TRUNCATED_MASS = 20.0  # IDF weight those words need (about four distinctive ones)
SLOT_WORDS = 3  # words a template's unquoted slot (a model name, a file) may take on either side
SLOT_TYPO = 66  # rapidfuzz ratio at which a slot's word is the signature's, mistyped (`kernal`, `cxt`)
NAME_LIKE = re.compile(r"[_\d]")  # an identifier, not a word of English
CONTEXT_MASS = 60.0  # IDF weight (about ten distinctive words) the rest of a paste needs to count in full
LINE_DOUBT = 0.5  # share of the line picker's doubt (prose, warnings, earlier exceptions) a match keeps
# the system a paste comes from, told by its paths: a word the entries about that system say
PLATFORMS = (
    ("macos", re.compile(r"(?<![\w/])/Users/\w|/opt/homebrew/|\.dylib\b|\bdarwin\b", re.I)),
    ("windows", re.compile(r"\b[A-Z]:\\\\?[\w$.-]|\[WinError \d+\]")),
)
HUB_SHOWN = 3  # a tie's hub is kept among this many first answers
UNDECIDED = TIE / 10  # tied entries the rest of the paste separates by less than this: no confident pick
FILE_MISMATCH = 0.85  # a signature naming another library file than the paste's
# a signature that is a wrapper's report of another error: `InductorError: IndexError: ...`
WRAPPED = re.compile(
    r"\s*(?:[\w.]+\.)?(\w+(?:Error|Exception)):\s*(?:[\w.]+\.)?\w+(?:Error|Exception|Warning):"
)
WRAPPER_MISSING = 0.85  # a signature of a wrapper's report of an error, for that error raised alone
KIND_MISMATCH = 0.85  # a signature naming another kind of symbol, key list or type difference than the paste
SIGNATURE_CACHE = 200_000  # signatures kept scored in memory (a few hundred bytes each)
SAME_MESSAGE = 0.85  # share of the shorter signature's IDF weight the other must hold
CONTEXT_CHARS = 20_000  # of a paste, read to order tied entries
CONTEXT_TERMS = 40  # hits this close to the best are ordered by the rest of the paste
BARE_WORDS = 4
# Python's own errors say little without a name in them: "EOFError: Ran out of input" has several
# causes, "ZeroDivisionError: float division by zero" thousands. Such a signature alone, short and
# naming nothing, is never a confident answer.
# (torch raises IndexError/ValueError/TypeError with messages of its own: those are not listed)
PYTHON_ERRORS = frozenset(
    [
        "zerodivisionerror",
        "eoferror",
        "recursionerror",
        "memoryerror",
        "filenotfounderror",
        "nameerror",
        "stopiteration",
        "brokenpipeerror",
        "permissionerror",
    ]
)
PYTHON_BARE_WORDS = 8
# Python's own message templates, raised by any code: a paste that shares only such a template (and
# Python type names) with a signature says nothing yet of the torch pitfall around it
PYTHON_TEMPLATE = re.compile(
    r"too many values to unpack|not enough values to unpack|unsupported operand type\(s\) for|"
    r"object is not (?:subscriptable|iterable|callable)|list index out of range|"
    r"takes \d+ positional arguments? but \d+ (?:was|were) given|got an unexpected keyword argument|"
    r"missing \d+ required positional arguments?|can only concatenate|cannot unpack non-iterable|"
    r"(?:string|list|tuple) indices must be integers(?: or slices)?|unhashable type|object of type '[^']*' has no len|"
    r"must be str, not",
    re.I,
)
PYTHON_TEMPLATE_WORDS = frozenset(
    [
        "expected",
        "given",
        "got",
        "argument",
        "arguments",
        "positional",
        "type",
        "types",
        "object",
        "int",
        "float",
        "str",
        "nonetype",
        "list",
        "tuple",
        "dict",
        "bool",
        "none",
    ]
)
BARE_CAP = 0.65
RARE_DF = 5  # a word in at most this many signatures is distinctive
PHRASE_MIN, PHRASE_MAX = 3, 8  # words of a short signature a line may hold whole
RARE_ENTRIES = 8  # ... and so is one in a few more signatures that all belong to this many entries
RARE_TOPIC_SIGNATURES = 30
TOGETHER_SIGNATURES = 200  # signatures read to tell whether common words together are one entry's
TEXT_TERMS = 12
OWN_SIGNATURES = 3  # of an entry's signatures, searched for the other causes of its message
RELATED_SHARE = 0.4  # with a confident match, others are shown only above this share of its score
BARE_TYPES = ("error", "exception", "warning")  # "the error: ..." is prose, not a type
EXC_TYPE = re.compile(r"(?:error|exception|warning|interrupt|exit)$")  # a token naming an exception type
# aux tokens that are not names: small numbers (normalize.SMALL_INT), file names (normalize.file_tokens),
# state_dict keys (`k:encoder`), and kinds: an undefined C++ symbol's (`sym:string`), a key list's shape
# (`sd:wrapper`), how two named tensor types differ (`ty:device`), the signal that killed a worker
# (`sg:bus`), which way a convolution's input is off by an axis (`dm:fewer`), what a size mismatch's
# current shape is (`sm:packed`); the module an import missed (`qd:`)
NUMBER_AUX = re.compile(r"n(?:m)?\d{1,2}$|p:|k:|qd:|sym:|sd:|ty:|sg:|dm:|sm:")
KIND_AUX = ("sym:", "sd:", "ty:", "sg:", "dm:", "sm:")
# the kinds a line says alone (a key list's shape is read from the whole paste)
LINE_KINDS = ("sym:", "ty:", "sg:", "dm:", "sm:")
MODULE = "qd:"  # the module an import missed, whole (normalize.MISSING_MODULE): it tells modules apart only
DECISIVE_SHAPES = frozenset(["wrapper", "prefix", "container", "counters"])  # of normalize.key_shape
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "my",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "when",
        "why",
        "with",
        "without",
        "not",
        "no",
        "do",
        "does",
        "did",
        "can",
        "get",
        "got",
    ]
)


def _kinds_differ(sig: frozenset[str], line: set[str]) -> bool:
    """Whether a signature and a line name different kinds of one thing (`sd:wrapper` and `sd:prefix`;
    a key list's shape says nothing against a size mismatch's shapes)."""
    return any(
        not {k for k in sig if k.startswith(family)} & line
        for family in {k[: k.index(":") + 1] for k in sig}
        if any(k.startswith(family) for k in line)
    )


class QueryError(ValueError):
    """The search text can't be searched (empty, too large); the message says why."""


@dataclass
class Hit:
    slug: str
    title: str
    category: str
    score: float
    matched: str  # the signature (or the words) that matched
    line: str = ""  # the line of the paste it matched
    kind: str = "signature"  # signature | text
    support: float = 0.0  # how well the entry also matches the paste's other lines (ranking only)


@dataclass
class SearchResult:
    query: str
    confident: bool
    results: list[Hit]
    lines: list[str] = field(default_factory=list)
    ignored: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "confident": self.confident,
            "results": [{k: v for k, v in asdict(h).items() if k != "support"} for h in self.results],
            "lines": self.lines,
            "ignored": self.ignored,
        }


# a line of an entry's text that links another entry (`[title](/e/slug)`): a hub's list of the
# message's other causes, which says what the paste would show for *that* entry, not for this one
LINKS_ANOTHER_ENTRY = re.compile(r"^.*\]\(/e/[\w-]+\).*$", re.M)
LINKED_SLUG = re.compile(r"\]\(/e/([\w-]+)\)")


def own_words(text: str) -> set[str]:
    """The words an entry's text says of itself: lines pointing to other entries left out."""
    return set(WORD.findall(LINKS_ANOTHER_ENTRY.sub(" ", text).lower()))


class EntryTexts:
    """The words of every entry's text (title apart), with document frequencies: what a paste's
    context is compared with when entries tie."""

    def __init__(self, db: Reader):
        df: Counter[str] = Counter()
        bodies = db.entry_bodies()
        for body in bodies:
            df.update(own_words(body))
        self.df, self.n = df, max(1, len(bodies))
        self._words: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._links: dict[str, frozenset[str]] = {}

    def idf(self, word: str) -> float:
        return math.log(1 + self.n / (self.df.get(word, 0) + 0.5))

    def words(self, db: Reader, slug: str) -> tuple[frozenset[str], frozenset[str]]:
        if slug not in self._words:
            row = db.entry_text(slug)
            title = frozenset(WORD.findall(row[0].lower()))
            self._words[slug] = (title, title | frozenset(own_words(row[1])))
        return self._words[slug]

    def links(self, db: Reader, slug: str) -> frozenset[str]:
        """The entries an entry's text links to (`/e/slug`)."""
        if slug not in self._links:
            self._links[slug] = frozenset(LINKED_SLUG.findall(db.entry_text(slug)[1]))
        return self._links[slug]


class QueryLine:
    """One error line of a paste as the index sees it: weights per word, typos corrected."""

    def __init__(
        self,
        text: str,
        weight: float,
        n: Normalized,
        index: SignatureIndex,
        group: int = 0,
        keys: str | None = None,  # the paste's key-list shape (Extracted.keys)
    ):
        self.text, self.weight, self.group = text, weight, group  # group: the paste line it comes from
        tokens, typos = [], set()
        for t in n.tokens:
            fixed = index.correct(t)
            tokens.append(fixed or t)
            if fixed:
                typos.add(fixed)
        self.words = tokens  # in the order the line says them
        self.tokens = tokens + [t for t in n.aux if not t.startswith(MODULE)]  # (no posting lists)
        w = index.weights(tokens, n.aux)
        for t in typos:
            w[t] *= TYPO_WEIGHT
        self.weights = w
        self.known_mass = sum(v for t, v in w.items() if t in index.idf)
        # the names it quotes, and the words of file names in it (a file can be the quoted thing)
        self.quoted = {t for t in n.aux if not NUMBER_AUX.match(t)} | {
            t[2:] for t in n.aux if t.startswith("p:")
        }
        self.aux = set(n.aux)
        self.kinds = {t for t in n.aux if t.startswith(LINE_KINDS)}
        self.modules = {t[3:] for t in n.aux if t.startswith(MODULE)}
        self.attribute = missing_attribute(text)
        self.called = called_function(text)
        # a paste's key lists are read together, whichever line holds them; only a shape that points
        # at one cause vetoes (keys missing on one side and others unexpected can be anything)
        if keys in DECISIVE_SHAPES and any(t.startswith("sd:") for t in n.aux):
            self.kinds.add(f"sd:{keys}")
        self._beyond_python: frozenset[str] | None = None
        self.alone: QueryLine | None = None  # for an exception line read with its source line: the line alone

    def aligned(self, sig_tokens: list[str]) -> tuple[list[str], list[str]]:
        """The line's words from where the signature begins, and the signature as the line may say
        it (without its `RuntimeError:` when the line has none): the whole line, or in a sentence of
        the user's ("... but it tells me that CUDA error: out of memory") from the signature's first
        word on; never inside another error's line, which is a message of its own."""
        words = self.words
        if sig_tokens and words[:1] != sig_tokens[:1] and EXC_TYPE.search(sig_tokens[0]):
            sig_tokens = sig_tokens[1:]  # a message pasted without its `RuntimeError:`
        if not sig_tokens or words[:1] == sig_tokens[:1] or sig_tokens[0] not in words:
            return words, sig_tokens
        if EXC_TYPE.search(words[0]) and words[0] not in BARE_TYPES:
            return words, sig_tokens
        return words[words.index(sig_tokens[0]) :], sig_tokens

    def says_whole(self, sig_tokens: list[str]) -> bool:
        """The line holds the whole signature, word for word, in words of the user's: then a
        sentence ("expected scalar type Half but found Float error when trying to train LoRa"), or
        after one ("... it tells me that CUDA error: out of memory"); no other names after it, and
        not the message going on with its values ("Tried to allocate" then "20.00 MiB (GPU 0; ...")."""
        words, sig_tokens = self.aligned(sig_tokens)
        n, rest = len(sig_tokens), words[len(sig_tokens) :]
        says = any(not t.startswith("_") and not EXC_TYPE.search(t) for t in sig_tokens)  # not a name alone
        return (
            says
            and (bool(rest) or len(words) < len(self.words))
            and words[:n] == sig_tokens
            and not (rest and rest[0].startswith("_"))
            and QUOTED not in rest
        )

    def starts_signature(self, sig_tokens: list[str], sig_w: dict[str, float]) -> bool:
        """The line (or the end of a sentence of the user's) is the signature's beginning, word for
        word, cut off before its end ("RuntimeError: Trying to backward through the graph a second
        time (or directly"), its last word maybe cut too; not a header that goes on below (`... for
        Net:`), and saying enough to stand alone."""
        words, sig_tokens = self.aligned(sig_tokens)
        n = len(words)
        if not n or n >= len(sig_tokens) or self.text.rstrip().endswith(":"):
            return False
        last, then = words[-1], sig_tokens[n - 1]
        if words[:-1] != sig_tokens[: n - 1] or not (
            last == then or (then.startswith(last) and last[0] != "_")
        ):
            return False
        said = {t for t in words if not t.startswith("_") and not EXC_TYPE.search(t)}
        return sum(sig_w.get(t, 0.0) for t in said) >= TRUNCATED_MASS

    def fills_slot(self, sig_tokens: list[str], sig_w: dict[str, float], known: dict[str, float]) -> bool:
        """The line is the signature word for word but for one run of a few words inside it, where
        the user's own name stands ("Cannot find callable dinov2_vits14 in hubconf" for "... callable
        custom in ..."): the same template with its unquoted slot filled differently. The words
        around the slot must say enough to stand alone, on both sides of it."""
        words, sig_tokens = self.aligned(sig_tokens)
        if not words or words == sig_tokens:
            return False
        head = 0
        for a, b in zip(words, sig_tokens, strict=False):
            if a != b:
                break
            head += 1
        tail = 0
        for a, b in zip(reversed(words[head:]), reversed(sig_tokens[head:]), strict=False):
            if a != b:
                break
            tail += 1
        mine, theirs = len(words) - head - tail, len(sig_tokens) - head - tail
        if not (head and tail and 1 <= mine <= SLOT_WORDS and 1 <= theirs <= SLOT_WORDS):
            return False
        # the user's slot holds a name (`dinov2_vits14`, `cxt`), or the signature's word mistyped; a
        # plain word there ("can only join a started process" for "... a child process") is another message
        slot, theirs_slot = (
            " ".join(words[head : len(words) - tail]),
            " ".join(sig_tokens[head : len(sig_tokens) - tail]),
        )
        if any(t in known for t in words[head : len(words) - tail]) or not (
            NAME_LIKE.search(slot) or fuzz.ratio(slot, theirs_slot) >= SLOT_TYPO
        ):
            return False
        kept = sig_tokens[:head] + sig_tokens[len(sig_tokens) - tail :]
        said = {t for t in kept if not t.startswith("_") and not EXC_TYPE.search(t)}
        return sum(sig_w.get(t, 0.0) for t in said) >= TRUNCATED_MASS

    def holds_the_rest(self, sig_w: dict[str, float], read_with_source: QueryLine) -> bool:
        """This error line holds most of what a signature says beyond the source line it was read
        with (`cuda(async=True) SyntaxError: invalid syntax` for `t.cuda(async=x)` above `SyntaxError:
        invalid syntax`): the source line decided which, the error line said the rest."""
        source = set(read_with_source.weights) - set(self.weights)
        rest = {t: w for t, w in sig_w.items() if t not in source}
        total = sum(rest.values())
        return bool(total) and sum(w for t, w in rest.items() if t in self.weights) >= SOURCE_REST * total

    def beyond_python(self) -> frozenset[str]:
        """Its words and names once Python's own message templates are set aside (computed on the
        first signature that holds such a template)."""
        if self._beyond_python is None:
            rest = normalize(PYTHON_TEMPLATE.sub(" ", self.text))
            words = {t for t in rest.tokens if not t.startswith("_") and not EXC_TYPE.search(t)}
            names = {t for t in self.aux if not NUMBER_AUX.match(t)}
            self._beyond_python = frozenset((words | names) - PYTHON_TEMPLATE_WORDS - STOPWORDS)
        return self._beyond_python


@dataclass(frozen=True)
class SignatureInfo:
    """One signature as scoring needs it, computed once per content generation."""

    slug: str
    text: str
    title: str
    category: str
    tokens: list[str]
    weights: dict[str, float]
    words: int  # its words, placeholders aside
    quoted: frozenset[str]  # the names it quotes
    names: frozenset[str]  # those and its file names
    python_template: bool  # it holds one of Python's own message templates
    kinds: frozenset[str]  # the kind of undefined C++ symbol, key list or killing signal it names (KIND_AUX)
    modules: frozenset[str]  # the module its import error names, whole (`torch.cuda.amp`)
    wrapper: str | None  # the wrapper whose report of another error it is (`inductorerror`)
    attribute: tuple[bool, str, str] | None  # what lacks which attribute (normalize.missing_attribute)
    called: str | None  # the function a Python call template names (normalize.called_function)


def _attributes_clash(sig: tuple[bool, str, str] | None, line: tuple[bool, str, str] | None) -> bool:
    """The same attribute missing from an unrelated module is another error (`module 'caffe2' has no
    attribute '__version__'` is not torch's); a module inside the one the signature names (`module
    'torch.amp'` under `module 'torch' has no attribute 'amp'`) is the same. Which attribute is missing
    is not decisive: a signature often names one example of many (`'OrderedDict' ... 'cuda'`, `'to'`),
    unless the name it gives the attribute is the paste's owner."""
    if sig is None or line is None:
        return False
    if sig[2] != line[2] and sig[2] == line[1]:  # the attribute it names is what the paste lacks one
        return True  # ("object has no attribute 'module'" is not "'module' object has no attribute 'x'")
    if not (sig[0] and line[0]) or sig[1] == line[1]:
        return False
    return not (_within(line[1], f"{sig[1]}.{sig[2]}") or _within(sig[1], f"{line[1]}.{line[2]}"))


def _modules_clash(sig: frozenset[str], line: set[str]) -> bool:
    """The paste misses another module than the signature. Not another: the same one, or one deeper
    than a dotted module the signature names (it may be any of its parts). Another: a submodule of a
    package the signature names whole (`torch._dynamo` is not `torch`: torch is there), a package the
    signature names a submodule of (`torch.utils` is not `torch.utils.serialization`), and any other
    part of it (`utils`, a repository's own folder)."""
    if not (sig and line):
        return False
    return not any(m == s or ("." in s and _within(m, s)) for m in line for s in sig)


def _within(module: str, package: str) -> bool:
    """`module` is `package` or one of its submodules."""
    return module == package or module.startswith(f"{package}.")


class SignatureIndex:
    """Token -> signature ids, with IDF, for every signature in the database."""

    def __init__(self, rows: Iterable[tuple[int, str, str]]):
        postings: dict[str, array[int]] = {}
        sizes: dict[int, int] = {}
        phrases: dict[tuple[str, str], list[tuple[tuple[str, ...], int, frozenset[str]]]] = {}
        for sid, tokens, aux in rows:
            said = tokens.split()
            # a short signature by its first two words, also without its exception type (a message in
            # a sentence seldom carries it), with the names it quotes: a line that says it word for word
            # and quotes those names holds it ("No module named 'torch'" among a hundred other modules)
            names = frozenset(t for t in aux.split() if not NUMBER_AUX.match(t))
            for phrase in (said, said[1:] if said and EXC_TYPE.search(said[0]) else []):
                if PHRASE_MIN <= len(phrase) <= PHRASE_MAX and (QUOTED not in phrase or names):
                    phrases.setdefault((phrase[0], phrase[1]), []).append((tuple(phrase), sid, names))
            words = set(said) | {t for t in aux.split() if not t.startswith(MODULE)}
            sizes[sid] = len(words)
            for t in words:
                postings.setdefault(t, array("i")).append(sid)
        # shortest signatures first: where many share a line's words equally ("No module named 'x'"),
        # the candidates kept (`heapq.nlargest` keeps the first of equals) are those the line holds
        # most of, not whichever the database listed first
        for t, ids in postings.items():
            if len(ids) > 1:
                postings[t] = array("i", sorted(ids, key=sizes.__getitem__))
        n = len(sizes)
        self.postings = postings
        self.phrases = phrases
        self.n = max(n, 1)
        self.idf = {t: math.log(1 + self.n / (len(p) + 0.5)) for t, p in postings.items()}
        self.idf_unknown = math.log(1 + self.n / 0.5)
        # typo correction looks only among words of about the same length sharing a beginning or an
        # end: a few dozen comparisons at any size
        buckets: dict[tuple[str, int], list[str]] = {}
        for t in postings:
            if len(t) >= TYPO_MIN - 1 and t.isalpha():
                buckets.setdefault(("<" + t[:2], len(t)), []).append(t)
                buckets.setdefault((">" + t[-3:], len(t)), []).append(t)
        self.buckets = buckets
        self._corrections: dict[str, str | None] = {}
        self._signatures: dict[int, SignatureInfo] = {}
        self._entries_using: dict[str, int] = {}  # token -> entries whose signatures hold it (rare tokens)
        self._held_together: dict[frozenset[str], bool] = {}  # a short signature's words -> one entry's

    def correct(self, token: str) -> str | None:
        """The known word a mistyped one most likely meant (`runtineerror` -> `runtimeerror`)."""
        if token in self.postings or len(token) < TYPO_MIN or not token.isalpha():
            return None
        if token in self._corrections:
            return self._corrections[token]
        n, get = len(token), self.buckets.get
        pool = {
            t for k in ("<" + token[:2], ">" + token[-3:]) for m in (n - 1, n, n + 1) for t in get((k, m), ())
        }
        best = process.extractOne(token, pool, scorer=fuzz.ratio, score_cutoff=TYPO_CUTOFF) if pool else None
        if len(self._corrections) < 100_000:  # user words repeat across pastes; bounded
            self._corrections[token] = best[0] if best else None
        return best[0] if best else None

    def signatures(self, db: Reader, ids: list[int]) -> list[SignatureInfo]:
        """The candidates' rows and weights: from memory when seen before (bounded), else the database."""
        cache = self._signatures
        missing = [i for i in ids if i not in cache]
        fetched: dict[int, SignatureInfo] = {}
        if missing:
            rows = db.signature_rows(missing)
            for sid, slug, text, tokens, aux, title, category in rows:
                toks, aux_set = tokens.split(), set(aux.split())
                fetched[sid] = SignatureInfo(
                    slug,
                    text,
                    title,
                    category,
                    toks,
                    self.weights(toks, aux_set),
                    sum(1 for t in toks if not t.startswith("_")),
                    frozenset(t for t in aux_set if not NUMBER_AUX.match(t)),
                    frozenset(t for t in aux_set if not NUMBER_AUX.match(t) or t.startswith(("p:", "k:"))),
                    bool(PYTHON_TEMPLATE.search(text)),
                    frozenset(t for t in aux_set if t.startswith(KIND_AUX)),
                    frozenset(t[3:] for t in aux_set if t.startswith(MODULE)),
                    m.group(1).lower() if (m := WRAPPED.match(text)) else None,
                    missing_attribute(text),
                    called_function(text),
                )
            if len(cache) < SIGNATURE_CACHE:
                cache.update(fetched)
        return [info for i in ids if (info := cache.get(i) or fetched.get(i)) is not None]

    def same_message(self, a: str, b: str) -> bool:
        """Two signatures say the same thing: the rarer words of the shorter one are in the other
        ("... cuda:0 and cpu!" and "... cuda:1 and cuda:0! (when checking argument ...)" are;
        "Expected is_sm80 to be true" and "Expected hasRecord(...) to be true" are not)."""
        ta, tb = set(normalize(a).tokens), set(normalize(b).tokens)
        idf, unknown = self.idf, self.idf_unknown
        wa, wb = (sum(idf.get(t, unknown) for t in x) for x in (ta, tb))
        shared = sum(idf.get(t, unknown) for t in ta & tb)
        return bool(wa and wb) and shared >= SAME_MESSAGE * min(wa, wb)

    def distinctive(self, db: Reader, tokens: list[str]) -> bool:
        """Whether a signature holds a word few signatures share, or that only a few entries use
        (`DGL` is in a dozen signatures of three entries); its exception type aside."""
        # the first token is the exception type, unless there is none (`rocBLAS error: ...`)
        words = [
            t
            for t in (tokens[1:] if tokens and EXC_TYPE.search(tokens[0]) else tokens)
            if not t.startswith("_")
        ]
        return any(self._rare(db, t) for t in words) or self._held_by_one_entry(db, words)

    def _held_by_one_entry(self, db: Reader, words: list[str]) -> bool:
        """Common words that together only one entry's signatures hold (`Invalid buffer size`)."""
        key = frozenset(words)
        if len(key) < 2:
            return False
        if key not in self._held_together:
            ids = min((self.postings.get(t, array("i")) for t in key), key=len)
            holders = (
                {info.slug for info in self.signatures(db, list(ids)) if key <= set(info.tokens)}
                if len(ids) <= TOGETHER_SIGNATURES
                else None
            )
            if len(self._held_together) < SIGNATURE_CACHE:
                self._held_together[key] = holders is not None and len(holders) == 1
            return holders is not None and len(holders) == 1
        return self._held_together[key]

    def _rare(self, db: Reader, token: str) -> bool:
        ids = self.postings.get(token)
        if ids is None or len(ids) > RARE_TOPIC_SIGNATURES:
            return False
        if len(ids) <= RARE_DF:
            return True
        if EXC_TYPE.search(token):  # a wrapper's type (`InductorError`) is no topic
            return False
        if token not in self._entries_using:
            self._entries_using[token] = len({info.slug for info in self.signatures(db, list(ids))})
        return self._entries_using[token] <= RARE_ENTRIES

    def weights(self, tokens: list[str], aux: list[str] | set[str]) -> dict[str, float]:
        idf, unknown = self.idf, self.idf_unknown
        w = {t: idf.get(t, unknown) for t in tokens}
        for t in aux:
            # a kind only vetoes (KIND_MISMATCH), a missing module only tells modules apart: no likeness
            if not t.startswith((*KIND_AUX, MODULE)):
                w.setdefault(t, AUX_WEIGHT * idf.get(t, unknown))
        return w

    def candidates(self, lines: list[QueryLine]) -> list[int]:
        """Per error line, the signatures sharing the most IDF weight of its rarest tokens.

        Rare tokens first, within a budget of postings: a huge knowledge base costs the same as a
        small one, and common words ("runtimeerror", "tensor") never decide anything anyway. Each
        line gathers its own: a sentence of prose with common words in it must not crowd out the
        short signature the error line matches whole.
        """
        postings, idf = self.postings, self.idf
        picked: dict[int, None] = {}
        # the first MAX_LINES paste lines, each with its variants (a warning with the source line
        # echoed under it is two readings of one line, not two of the four)
        first = set(list(dict.fromkeys(q.group for q in lines))[:MAX_LINES])
        # (an error line read with its source line gathers nothing of its own: the error alone does)
        shown = [q for q in lines if q.group in first and q.alone is None]
        for q in shown:
            best = q.group == shown[0].group  # (each reading of the best line: alone, joined with the next)
            tokens = {t for t in q.tokens if t in postings}
            score: dict[int, float] = {}
            get = score.get
            # the best line gets at least half: with a share each, a message of common words
            # (`shape '[-1, 3]' is invalid for input of size 2`) may never reach its own signature
            budget = max(POSTINGS_BUDGET // len(shown), POSTINGS_BUDGET // 2 if best else 0)
            # (ties by the word itself: a set's order changes with the process's hash seed)
            for t in sorted(tokens, key=lambda t: (len(postings[t]), t)):
                ids = postings[t]
                if len(ids) > budget and score:
                    break
                budget -= len(ids)
                w = idf[t]
                for sid in ids[:POSTINGS_BUDGET]:
                    score[sid] = get(sid, 0.0) + w
            # a word only a few signatures hold brings them all: a line of common words around it
            # ("..., maybe the version of python, pytorch, cuda is incompatible") must not outvote it
            for t in sorted(tokens):
                if len(postings[t]) <= RARE_DF:
                    picked.update(dict.fromkeys(postings[t]))
            # a short signature the line holds word for word, however common its words ("... then it
            # reports `CUDA error: out of memory`"): gathering rarest words first may not reach it
            words, phrases_at = q.words, self.phrases.get
            for j in range(len(words) - PHRASE_MIN + 1):
                for phrase, sid, names in phrases_at((words[j], words[j + 1]), ()):
                    if tuple(words[j : j + len(phrase)]) == phrase and names <= q.quoted:
                        picked[sid] = None
            # the best line gathers most; the others a share each
            keep = CANDIDATES if best else CANDIDATES // 2
            picked.update(
                dict.fromkeys(sid for sid, _ in heapq.nlargest(keep, score.items(), key=itemgetter(1)))
            )
        return list(picked)


def similarity(line_w: dict[str, float], sig_w: dict[str, float], known_mass: float | None = None) -> float:
    """How well a paste line matches a signature, 0-1.

    The best of: F2 of weighted token overlap (how much of the signature the line contains, mostly);
    for a line that is a distinctive fragment of the signature (a truncated or partly pasted message),
    how much of the line's known words the signature holds; for a line that holds the whole signature
    among other words (a sentence around it), how much of the signature it holds. The last two are
    scaled by how distinctive the shared words are. `known_mass` is the line's weight over words the
    index knows (unknown words are the user's).
    """
    shared = sum(min(v, line_w[t]) for t, v in sig_w.items() if t in line_w)
    if not shared:
        return 0.0
    recall = shared / sum(sig_w.values())
    precision = shared / sum(line_w.values())
    f2 = 5 * precision * recall / (4 * precision + recall)
    sure = 1 - math.exp(-shared / PARTIAL_MASS)
    contained = PARTIAL_CAP * recall * recall * sure
    if known_mass:
        inside = shared / known_mass
        fragment = PARTIAL_CAP * inside * inside * sure
        return max(f2, fragment, contained)
    return max(f2, contained)


class Searcher:
    """Search over one database; rebuilds its signature index when the content changes."""

    def __init__(
        self,
        engine: Engine,
        *,
        confident_score: float = 0.8,
        confident_margin: float = 0.05,
        limit: int = 10,
        max_query_bytes: int = 1_000_000,
    ):
        self.engine = engine
        self.confident_score = confident_score
        self.confident_margin = confident_margin
        self.limit = limit
        self.max_query_bytes = max_query_bytes
        self._lock = threading.Lock()
        self._generation: str | None = None
        self._index = SignatureIndex([])
        self._texts: EntryTexts | None = None  # built on the first tie, per content generation
        self._other_causes: dict[str, list[Hit]] = {}  # slug -> other causes, per content generation
        self.store = SearchStore(engine)

    @classmethod
    def from_settings(cls, engine: Engine, settings: Settings) -> Searcher:
        return cls(
            engine,
            confident_score=settings.confident_score,
            confident_margin=settings.confident_margin,
            limit=settings.search_limit,
            max_query_bytes=settings.max_query_bytes,
        )

    # -- plumbing ---------------------------------------------------------------------------
    def _refresh(self, db: Reader) -> SignatureIndex:
        """The index of the content generation the database holds now (a sync, here or in another
        replica, bumps it)."""
        gen = db.generation()
        if gen != self._generation:
            with self._lock:
                if gen != self._generation:
                    self._index = SignatureIndex(db.signature_tokens())
                    self._texts = None
                    self._other_causes = {}
                    self._generation = gen
        return self._index

    # -- search -----------------------------------------------------------------------------
    def search(
        self, text: str, *, limit: int | None = None, hide: frozenset[str] = frozenset()
    ) -> SearchResult:
        """The entries that explain `text`, best first, and whether the first is a confident answer.
        `hide`: entries to search without (the evaluation asks what a paste whose entry is missing gets)."""
        if not isinstance(text, str):
            raise QueryError("the search text must be a string")
        if len(text.encode("utf-8", "surrogatepass")) > self.max_query_bytes:
            raise QueryError(
                f"the search text is larger than {self.max_query_bytes} bytes; paste the last part "
                "of the traceback instead"
            )
        # lone surrogates (`\ud800` in a JSON body) can't be encoded anywhere downstream
        text = text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")
        if not text.strip():
            raise QueryError("the search text is empty: paste an error message or a traceback")
        with self.store.reader() as db:
            return self._search(db, text, limit or self.limit, hide)

    def _search(self, db: Reader, text: str, limit: int, hide: frozenset[str] = frozenset()) -> SearchResult:
        index = self._refresh(db)
        ex = extract(text)
        ignored: Counter[str] = Counter()
        lines = []
        for (line, weight), group in zip(ex.lines, ex.groups, strict=True):
            n = normalize(line)
            if line not in ex.raised_by:  # (that one is another line read again)
                ignored.update(n.ignored)
            lines.append(QueryLine(line, weight, n, index, group, ex.keys))
        by_text = {q.text: q for q in lines}
        for q in lines:
            if q.text in ex.raised_by:
                q.alone = by_text.get(ex.raised_by[q.text])
        if ex.frames:
            ignored["traceback frame"] = ex.frames
        hits = self._by_signature(db, index, lines) if lines else {}
        if hide:
            hits = {slug: h for slug, h in hits.items() if slug not in hide}
        confident = self._decisive(list(hits.values()), index)
        if not lines or ex.plain or not hits:
            # free text, or an error no signature knows: BM25 over what entries say
            free = ex.free_text if not lines or ex.plain else " ".join(q.text for q in lines)
            text_hits, text_confident = self._by_text(db, free, only_free=not lines or ex.plain)
            if hide and any(h.slug in hide for h in text_hits):
                text_hits, text_confident = [h for h in text_hits if h.slug not in hide], False
            confident = confident or (text_confident and not hits)
            for h in text_hits:
                hits.setdefault(h.slug, h)
        ranked = sorted(hits.values(), key=lambda h: -(h.score + 0.1 * h.support))
        ranked, undecided = self._break_ties(db, ranked, clean(text[:CONTEXT_CHARS]))
        ranked = self._hub_in_sight(db, ranked)
        ranked = ranked[:limit]
        confident = confident and not undecided
        if confident and ranked:  # a clear answer: don't bury it under faint look-alikes
            ranked = [h for h in ranked if h.score >= RELATED_SHARE * ranked[0].score]
        return SearchResult(
            text[:200],
            confident and bool(ranked),
            ranked,
            [q.text for q in lines],
            {k: v for k, v in ignored.items() if v},
        )

    def other_causes(self, slug: str, signatures: list[str], limit: int = 6) -> list[Hit]:
        """The other entries for the message an entry is about: what else makes PyTorch print it
        (shown on the entry page, so a reader who landed on the wrong cause sees the rest)."""
        with self.store.reader() as db:
            index = self._refresh(db)
            if (known := self._other_causes.get(slug)) is not None:
                return known[:limit]
            found: dict[str, Hit] = {}
            for sig in signatures[:OWN_SIGNATURES]:
                for h in self._search(db, sig, self.limit).results:
                    if (
                        h.slug != slug
                        and h.kind == "signature"
                        and h.score >= self.confident_score
                        and index.same_message(sig, h.matched)
                        and h.score > getattr(found.get(h.slug), "score", 0.0)
                    ):
                        found[h.slug] = h
            ranked = self._other_causes[slug] = sorted(found.values(), key=lambda h: -h.score)
        return ranked[:limit]

    def _decisive(self, hits: list[Hit], index: SignatureIndex) -> bool:
        """Confident: the best signature match is good enough, and no entry matching a *different*
        message comes close. Entries matching the same message (one error, several causes) are
        alternatives the reader sees side by side, not rivals. The two numbers were chosen on the
        real-paste evaluation set (eval/README.md says how)."""
        if not hits:
            return False
        ranked = sorted(hits, key=lambda h: -h.score)
        best = ranked[0]
        if best.score < self.confident_score:
            return False
        rivals = [h for h in ranked[1:] if h.score > best.score - self.confident_margin]
        return all(index.same_message(best.matched, h.matched) for h in rivals)

    def _by_signature(self, db: Reader, index: SignatureIndex, lines: list[QueryLine]) -> dict[str, Hit]:
        ids = index.candidates(lines)
        if not ids:
            return {}
        best: dict[str, Hit] = {}
        best_group: dict[str, int] = {}
        per_line: dict[str, dict[int, float]] = {}  # slug -> paste line (variants as one) -> best score
        for sig in index.signatures(db, ids):
            slug, sig_text, title, category = sig.slug, sig.text, sig.title, sig.category
            sig_tokens, sig_w, words = sig.tokens, sig.weights, sig.words
            sig_quoted, sig_names = sig.quoted, sig.names
            for q in lines:
                sim = similarity(q.weights, sig_w, q.known_mass)
                if q.says_whole(sig_tokens):
                    sim = max(sim, WHOLE_THEN_PROSE)
                elif sim < TRUNCATED and (
                    q.starts_signature(sig_tokens, sig_w) or q.fills_slot(sig_tokens, sig_w, index.idf)
                ):
                    sim = TRUNCATED
                if q.alone is not None and not q.alone.holds_the_rest(sig_w, q):
                    # the source line backs a match the error itself makes, never makes one alone
                    # (`from torch._C import *` is above every error importing torch can raise)
                    sim = min(sim, similarity(q.alone.weights, sig_w, q.alone.known_mass) + SOURCE_GAIN)
                # how sure the picker is that a line is the error orders lines, but the match decides:
                # a whole message in a sentence around it is that error
                score = sim * (1 - LINE_DOUBT * (1 - q.weight))
                # a signature whose point is a quoted name ("No module named 'models'") must not
                # claim a paste that quotes other names only, nor a call template another function's
                clash = (
                    _attributes_clash(sig.attribute, q.attribute)
                    or _modules_clash(sig.modules, q.modules)
                    or bool(sig.called and q.called and sig.called != q.called)
                )
                if (sig_quoted and q.quoted - sig_quoted) or clash:
                    # the paste names other things than the signature ("module 'torch' has no
                    # attribute 'compile'" is not "... attribute 'ModuleDict'"): penalised by the
                    # share of names that differ; naming fewer (a truncated paste) is no conflict
                    floor = QUOTED_MISMATCH if words <= GENERIC_WORDS else QUOTED_MISMATCH_LONG
                    agree = len(sig_quoted & q.quoted) / max(1, min(len(sig_quoted), len(q.quoted)))
                    # (a missing module under a package the signature quotes is another module too)
                    if clash or any(
                        "." in m and m.split(".")[0] in sig_quoted and not sig.modules for m in q.modules
                    ):
                        agree = 0.0
                    score *= floor + (1 - floor) * agree
                # a short signature says too little alone, unless the names or files it quotes agree
                # or it holds a rare word (`CUFFT_INTERNAL_ERROR`)
                named = bool(sig_names & q.aux)
                if (words <= BARE_WORDS and not named and not index.distinctive(db, sig_tokens)) or (
                    not sig_quoted
                    and words <= PYTHON_BARE_WORDS
                    and sig_tokens
                    and sig_tokens[0] in PYTHON_ERRORS
                ):
                    score = min(score, BARE_CAP)  # says too little alone
                elif sig.python_template and not q.beyond_python() & (set(sig_tokens) | sig_names):
                    score = min(score, BARE_CAP)  # shares only Python's own template with it
                # which library failed to load tells such errors apart ("libtorchaudio.so: undefined
                # symbol" is not "torch_scatter/_version_cuda.so: undefined symbol")
                sig_files = {t for t in sig_names if t.startswith("p:")}
                if sig_files and not sig_files & q.aux and any(t.startswith("p:") for t in q.aux):
                    score *= FILE_MISMATCH
                # and, when no library file agrees, the kind of symbol missing (normalize.SYMBOL_KINDS)
                # the shape of the keys a state_dict lacks or has to spare (normalize.key_shape), or how two
                # tensor types a type check names differ (normalize.TYPE_PAIR), or the signal that killed
                # a worker (normalize.KILLED_BY_SIGNAL)
                if _kinds_differ(sig.kinds, q.kinds) and not sig_files & q.aux:
                    score *= KIND_MISMATCH
                # a wrapper's report of an inner error (`InductorError: IndexError: ...`) is not that
                # error raised alone: where it was raised is half of what such a signature says
                if sig.wrapper and sig.wrapper not in q.weights:
                    score *= WRAPPER_MISSING
                score = round(score, 4)
                if score <= 0.1:
                    continue
                if q.weight > PLAIN_BESIDE_ERROR:  # a plain line beside the error doesn't back an entry
                    seen = per_line.setdefault(slug, {})
                    seen[q.group] = max(seen.get(q.group, 0.0), score)
                if slug not in best or best[slug].score < score:
                    best[slug] = Hit(slug, title, category, score, sig_text, q.text)
                    best_group[slug] = q.group
        # an entry that also explains other lines of the paste ranks first among equals
        for slug, hit in best.items():
            hit.support = sum(v for g, v in per_line.get(slug, {}).items() if g != best_group[slug])
        return best

    def _break_ties(self, db: Reader, ranked: list[Hit], paste: str) -> tuple[list[Hit], bool]:
        """Entries that match the error about equally well (one message, several causes) are ordered
        by the rest of the paste (its frames' modules, the code that failed, the words around it)
        against what each entry says, and by whether the entry is *about* that message (its title).
        Also says whether the paste left the first two undecided (nothing in it favours either)."""
        if len(ranked) < 2 or ranked[1].score < ranked[0].score - TIE:
            return ranked, False
        tied = [h for h in ranked if h.score >= ranked[0].score - TIE]
        texts = self._entry_texts(db)
        said = set(WORD.findall(paste.lower())) | {
            system for system, shows in PLATFORMS if shows.search(paste)
        }
        known = {w for w in said if w in texts.df}

        # the matched line's words, left out of "the rest of the paste" (tied hits often share a line)
        line_words = {
            line: {w for w in WORD.findall(line.lower()) if not (w.isdigit() and len(w) > 2)}
            for line in {h.line for h in tied}
        }

        def key(h: Hit) -> float:
            title, body = texts.words(db, h.slug)
            # the rest of the paste: the words beyond the matched line (frames, code, prose)
            # (the values printed in the error line itself count: sizes such as 2048 or 514 name
            # the model, while the line's words are the message every tied entry shares)
            rest = known - line_words[h.line]
            mass = sum(texts.idf(w) for w in rest)
            # (a paste with little beyond its error line says little: a word or two decide nothing)
            context = sum(texts.idf(w) for w in rest & body) / max(mass, CONTEXT_MASS) if mass else 0.0
            # how much of what the entry is named for (its title, its slug) the paste shows: an
            # entry named for a circumstance ("... after resuming optimizer.step", "hard-coded
            # batch size") that the paste never mentions fits it less than the general one (the
            # paste's words only: the matched signature's own words would vouch for their entry)
            about = (
                sum(
                    len(named & said) / len(named)
                    for named in (title - STOPWORDS, set(h.slug.split("-")) - STOPWORDS)
                    if named
                )
                / 2
            )
            # moves an entry by at most TIE: a clearly better match still wins. Within the tie, the
            # match counts at half weight: what sets tied signatures apart is mostly their example
            # values (`[Rank 0]`, `at entry 1`), which say nothing of the cause
            return TIE_MATCH_WEIGHT * h.score + 0.1 * h.support + TIE * (context + about) / 2

        keyed = sorted(((key(h), h) for h in tied), key=lambda kh: -kh[0])
        order = [h for _, h in keyed]
        undecided = keyed[0][0] - keyed[1][0] < UNDECIDED
        if undecided:
            # nothing in the paste favours one cause: the entry whose list of causes links all
            # the others (a hub for the message) answers it, since the reader finds the rest there
            close = [h for k, h in keyed if k > keyed[0][0] - UNDECIDED]
            hub = next(
                (h for h in close if {o.slug for o in close} - {h.slug} <= texts.links(db, h.slug)), None
            )
            if hub is not None:
                order.remove(hub)
                order.insert(0, hub)
                undecided = False
        return order + ranked[len(tied) :], undecided

    def _hub_in_sight(self, db: Reader, ranked: list[Hit]) -> list[Hit]:
        """The entry that lists every cause ranked above it (a hub for their message) is kept among
        the first HUB_SHOWN, for a reader whose case is none of those."""
        links = self._entry_texts(db).links
        for i, h in enumerate(ranked[HUB_SHOWN:], HUB_SHOWN):
            if {o.slug for o in ranked[:i]} <= links(db, h.slug):
                return [*ranked[: HUB_SHOWN - 1], h, *ranked[HUB_SHOWN - 1 : i], *ranked[i + 1 :]]
        return ranked

    def _entry_texts(self, db: Reader) -> EntryTexts:
        if self._texts is None:
            with self._lock:
                if self._texts is None:
                    self._texts = EntryTexts(db)
        return self._texts

    def _by_text(self, db: Reader, text: str, *, only_free: bool) -> tuple[list[Hit], bool]:
        words = [
            w for w in WORD.findall(text.lower()) if w not in STOPWORDS and not w.isdigit() and len(w) > 1
        ]
        terms = list(dict.fromkeys(words))[:TEXT_TERMS]
        if not terms:
            return [], False
        # every word first (a small set, cheap to rank); any word only when that finds too little
        every = db.free_text(terms, every=True, limit=self.limit)
        rows = (
            every
            if len(every) >= 3 or len(terms) == 1
            else every
            + [
                r
                for r in db.free_text(terms, every=False, limit=self.limit)
                if r[0] not in {e[0] for e in every}
            ]
        )
        if not rows:
            return [], False
        # BM25 is unbounded; squash it below the confidence threshold (free text rarely proves a match)
        hits = [
            Hit(slug, title, cat, round(0.6 * s / (s + 8.0), 4), " ".join(terms), text[:200], "text")
            for slug, title, cat, s in rows[: self.limit]
        ]
        # short free text naming one entry clearly: the only entry with every word, well ahead
        confident = (
            only_free
            and 2 <= len(terms) <= 8
            and len(every) >= 1
            and (len(every) == 1 or every[0][3] >= 1.5 * every[1][3])
        )
        return hits, confident
