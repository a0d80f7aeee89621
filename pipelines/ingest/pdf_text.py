"""Text of each page from pypdf, and its cleaning (pure functions on strings).

The shape of a cleaned page, which the splitter relies on:

- Paragraphs are separated by exactly one blank line ("\\n\\n"); a line break inside a paragraph stays
  a single "\\n" (it carries list items, headings and table rows; sentence splitters read it as a
  space). No line has leading or trailing spaces, no run of spaces or tabs is longer than one space,
  and the page has no leading or trailing whitespace.
- Paragraph breaks come from blank lines in pypdf's output, and from layout: a line ending in
  . ! ? or : that is shorter than 3/4 of the document's usual line (the 80th percentile of its
  line lengths) ends its paragraph; a short line in capitals (a heading) stands alone; a list
  item ("(a)", "1.", "•") after a line ending in . ; : starts a new paragraph.
- Characters: NFC; the ligatures ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ, full-width ASCII and odd spaces folded to ASCII;
  other compatibility characters (§ ¶ ° µ ½ ² ™ …) are kept, since full NFKC would rewrite µ, ½
  and ² into other text. Control characters, zero-width spaces, byte-order marks, lone
  surrogates and soft hyphens (U+00AD) are removed.
- Hyphens at line ends. A soft hyphen at a line end always joins. For "frag-" + "next line": when
  the fragment is a plain word (lowercase or Capitalised, letters only) and the next line starts
  with a lowercase letter, the word is re-joined ("obli-\\ngation" -> "obligation") unless the
  document shows the hyphen is real: the hyphenated form appears elsewhere and the joined form
  does not, or the fragment is a prefix that takes a hyphen (self-, non-, third-). Otherwise, when
  the next line starts with a letter or digit ("COVID-\\n19", "pages 283-\\n288",
  "Defendant-\\nAppellee") or the fragment is already a compound ("terms-and-"), the hyphen is
  kept and the two parts are put together. Either way the rest of the word moves up to the line
  of its first part. A word broken across a page break stays broken: each page keeps its own text.
- Running headers and footers: a line among the first or last 3 lines of a page whose key
  (casefolded, digit runs and lone roman numerals as "#", spaces collapsed) appears on at least 60%
  of the pages that have text, and on at least 3 pages, is removed from those edges of every page.
  This also removes page numbers ("Page 3 of 20", "- 3 -", a bare "3"), and is repeated on the
  new edges so a footer of several lines goes entirely. A line on only 2 pages is never removed.
  When nothing but such lines is left in the whole document, they are the content and all stay.
  A repeated line that carries a docket or case number ("No. 20-1507", "Case: 1:19-cv-00012")
  stays where it first occurs: an opinion's or filing's number is part of its caption on page
  1, even where every page repeats it as a header.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import unicodedata
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence

from pypdf import PdfReader
from pypdf.errors import LimitReachedError

from pipelines.ingest.text_caps import TextBudget, is_cap_reached

logger = logging.getLogger(__name__)

FURNITURE_EDGE_LINES = 3
FURNITURE_MIN_SHARE = 0.6
FURNITURE_MIN_PAGES = 3
MAX_FURNITURE_ROUNDS = 3
# A line shorter than this share of the document's usual line length can end a paragraph.
SHORT_LINE_SHARE = 0.75
# Prefixes that are nearly always written with a hyphen in legal and medical English.
HYPHENATED_PREFIXES = frozenset({"self", "non", "third"})
MAX_TITLE_CHARS = 300

_LIGATURES = {"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"}
_CHAR_MAP = {
    **{ord(ligature): letters for ligature, letters in _LIGATURES.items()},
    **{code: chr(code - 0xFEE0) for code in range(0xFF01, 0xFF5F)},  # full-width ASCII
    **dict.fromkeys([0x00A0, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000, 0x09], " "),
    **dict.fromkeys([0x200B, 0x2060, 0xFEFF], ""),
    0x2010: "-",
    0x2011: "-",
    0x2028: "\n",
    0x2029: "\n\n",
    0x0B: "\n",
    0x0C: "\n",
}
_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_SOFT_HYPHEN_BREAK_RE = re.compile(r"\u00ad[ \t]*\n[ \t]*")
_SPACES_RE = re.compile(r" {2,}")
_DIGITS_RE = re.compile(r"\d+")
_ROMAN_RE = re.compile(r"(?=[ivx])x{0,3}(?:ix|iv|v?i{0,3})")  # i to xxxix: front matter
# "No. 20-1507", "Nos. 19-1, 19-2", "Case: 1:19-cv-00012", "Docket No. 363A14-4".
_CASE_NUMBER_RE = re.compile(
    r"\b(?:(?:Case|Docket|Appeal)\s*(?:Nos?\.|Number)?\s*:?|Nos?\.)\s*[A-Z0-9]*\d[\w.]*[-–:]\w"
)
_WORD_RE = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
_TERMINAL_RE = re.compile(r"[.!?:][\"'”’)\]]*$")
_LIST_END_RE = re.compile(r"[.;:!?][\"'”’)\]]*$")
_LIST_MARKER_RE = re.compile(
    r"^(?:[•●▪◦‣∙·\-–*]\s|\(?[a-z0-9]{1,3}\)\s|\d{1,3}\.\s|\d{1,3}(?:\.\d{1,3})+\.?\s)", re.I
)
_OPENING_PUNCT = "([{\"'“‘"
_TITLE_PREFIX_RE = re.compile(r"^microsoft (?:word|powerpoint|excel) - ", re.I)
_FILE_EXT_RE = re.compile(r"\.(?:docx?|pdf|rtf|odt|tex|txt|wpd|indd|pages|xlsx?|pptx?)$", re.I)
_GENERIC_TITLES = frozenset(
    {"untitled", "title", "doi", "document", "binder", "slide", "print", "none", "null", "unknown"}
)


@contextlib.contextmanager
def quiet_pypdf() -> Iterator[None]:
    """Silence pypdf's logging and warnings: they can quote document content."""
    pypdf_logger = logging.getLogger("pypdf")
    level = pypdf_logger.level
    pypdf_logger.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        pypdf_logger.setLevel(level)


def extract_page_texts(
    reader: PdfReader, budget: TextBudget | None = None
) -> tuple[list[str], list[int]]:
    """Each page's raw text, and the numbers of the pages pypdf failed on (they stay empty).

    With a `budget`, extraction stops with TooMuchTextError as soon as a page or the document
    gives more text than it allows (pipelines/ingest/text_caps.py). pypdf's own safety limits
    (LimitReachedError) fail the document, not the page: they mean the file is abusive.
    """
    texts: list[str] = []
    failed_pages: list[int] = []
    for number, page in enumerate(reader.pages, start=1):
        try:
            if budget is None:
                texts.append(page.extract_text())
                continue
            budget.start_page(number)
            text = page.extract_text(
                visitor_operand_before=budget.visit_operator, visitor_text=budget.visit_text
            )
            budget.end_page(text)
            texts.append(text)
        except (MemoryError, LimitReachedError):
            raise
        except BaseException as error:
            if budget is not None and is_cap_reached(error):
                raise budget.refusal() from None
            if not isinstance(error, Exception):
                raise
            logger.info("page %d unreadable: %s", number, type(error).__name__)
            texts.append("")
            failed_pages.append(number)
    return texts, failed_pages


def normalize_chars(text: str) -> str:
    """NFC, selective compatibility folding, no control characters; line ends become "\\n"."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", text).translate(_CHAR_MAP)
    text = _SOFT_HYPHEN_BREAK_RE.sub("", text).replace("\u00ad", "")
    return _CONTROL_RE.sub("", text)


def split_lines(text: str) -> list[str]:
    """Lines of normalised text with spaces collapsed and trimmed; blank lines are ""."""
    return [_SPACES_RE.sub(" ", line).strip() for line in normalize_chars(text).split("\n")]


def furniture_key(line: str) -> str:
    """What a running header, footer or page number looks like whatever page it is on."""
    key = _DIGITS_RE.sub("#", " ".join(line.casefold().split()))
    # A lone roman numeral (a front-matter page number) counts as a number too.
    return "#" if _ROMAN_RE.fullmatch(key.strip(" -–—|.()[]")) else key


def _edge_indices(lines: list[str]) -> list[int]:
    filled = [i for i, line in enumerate(lines) if line]
    if len(filled) <= 2 * FURNITURE_EDGE_LINES:
        return filled
    return filled[:FURNITURE_EDGE_LINES] + filled[-FURNITURE_EDGE_LINES:]


def carries_case_number(line: str) -> bool:
    """Whether a line gives a docket or case number: "No. 20-1507", "Case No. 1:19-cv-12"."""
    return _CASE_NUMBER_RE.search(line) is not None


def remove_running_furniture(pages: Sequence[list[str]]) -> tuple[list[list[str]], int]:
    """Drop running headers, footers and page numbers; return the pages and the lines removed.
    A case-number line is kept on the first page that has it."""
    pages = [list(lines) for lines in pages]
    kept_at: dict[str, int] = {}  # key of a case-number line -> the page index that keeps it
    num_text_pages = sum(1 for lines in pages if any(lines))
    min_pages = max(FURNITURE_MIN_PAGES, math.ceil(FURNITURE_MIN_SHARE * num_text_pages))
    num_removed = 0
    for _ in range(MAX_FURNITURE_ROUNDS):
        counts: Counter[str] = Counter()
        for lines in pages:
            counts.update({furniture_key(lines[i]) for i in _edge_indices(lines)})
        furniture = {key for key, count in counts.items() if count >= min_pages}
        round_removed = 0
        for index, lines in enumerate(pages):
            drop = set()
            for i in _edge_indices(lines):
                key = furniture_key(lines[i])
                if key not in furniture:
                    continue
                if carries_case_number(lines[i]) and kept_at.setdefault(key, index) == index:
                    continue
                drop.add(i)
            round_removed += len(drop)
            lines[:] = [line for i, line in enumerate(lines) if i not in drop]
        num_removed += round_removed
        if not round_removed:
            break
    return pages, num_removed


def word_forms(pages: Sequence[list[str]]) -> frozenset[str]:
    """Casefolded words (hyphenated compounds whole) written inside lines: evidence for hyphens."""
    return frozenset(
        w.casefold() for lines in pages for line in lines for w in _WORD_RE.findall(line)
    )


def _is_plain_word(fragment: str) -> bool:
    return fragment.isalpha() and (
        fragment.islower() or fragment[1:].islower() or len(fragment) == 1
    )


def _keeps_hyphen(fragment: str, rest: str, known_words: frozenset[str]) -> bool:
    """Whether "fragment-" at a line end followed by `rest` is a real hyphen, not a word break."""
    if not (_is_plain_word(fragment) and rest[:1].islower()):
        return True
    rest_word = _WORD_RE.match(rest)
    if rest_word is None:
        return True
    joined = (fragment + rest_word.group()).casefold()
    hyphenated = f"{fragment}-{rest_word.group()}".casefold()
    if joined in known_words:
        return False
    return hyphenated in known_words or fragment.casefold() in HYPHENATED_PREFIXES


def join_hyphenated(lines: list[str], known_words: frozenset[str] = frozenset()) -> list[str]:
    """Re-join words broken across lines by a hyphen; see the module docstring for the rule."""
    lines = list(lines)
    emptied = set()
    for i in range(len(lines) - 1):
        line, following = lines[i], lines[i + 1]
        if not (line.endswith("-") and following and following[0].isalnum()):
            continue
        token = line.rsplit(" ", 1)[-1][:-1]
        fragment = token.lstrip(_OPENING_PUNCT)
        if not fragment or not fragment[-1].isalnum():
            continue  # a dash standing alone ("- 3 -"), not a hyphen inside a word
        rest, _, remainder = following.partition(" ")
        keep = "-" in fragment or _keeps_hyphen(fragment, rest, known_words)
        lines[i] = (line if keep else line[:-1]) + rest
        lines[i + 1] = remainder
        if not remainder:
            emptied.add(i + 1)  # the line was only the word's end: no blank line (paragraph break)
    return [line for i, line in enumerate(lines) if i not in emptied]


def typical_line_length(pages: Sequence[list[str]]) -> int:
    """The 80th percentile of line lengths: a full line of body text."""
    lengths = sorted(len(line) for lines in pages for line in lines if line)
    return lengths[int(0.8 * (len(lengths) - 1))] if lengths else 0


def _is_heading(line: str, max_short: float) -> bool:
    letters = [c for c in line if c.isalpha()]
    return len(letters) >= 2 and len(line) < max_short and all(c.isupper() for c in letters)


def _breaks_between(previous: str, line: str, max_short: float) -> bool:
    if _TERMINAL_RE.search(previous) and len(previous) < max_short:
        return True
    if _is_heading(previous, max_short) != _is_heading(line, max_short):
        return True
    return bool(_LIST_END_RE.search(previous) and _LIST_MARKER_RE.match(line))


def assemble_paragraphs(lines: Sequence[str], typical_length: int) -> str:
    """Page text: paragraphs joined by "\\n\\n", lines inside a paragraph by "\\n"."""
    max_short = SHORT_LINE_SHARE * typical_length
    paragraphs: list[list[str]] = []
    previous = ""
    for line in lines:
        if not line:
            previous = ""
            continue
        if not previous or _breaks_between(previous, line, max_short):
            paragraphs.append([])
        paragraphs[-1].append(line)
        previous = line
    return "\n\n".join("\n".join(paragraph) for paragraph in paragraphs)


def clean_pages(raw_texts: Sequence[str]) -> tuple[list[str], int]:
    """Cleaned text of each page, and the number of header/footer lines removed."""
    raw_pages = [split_lines(text) for text in raw_texts]
    pages, num_removed = remove_running_furniture(raw_pages)
    if not any(line for lines in pages for line in lines):
        # The repeated lines were all there was (one line on every page): content, not furniture.
        pages, num_removed = raw_pages, 0
    known_words = word_forms(pages)
    typical_length = typical_line_length(pages)
    cleaned = [
        assemble_paragraphs(join_hyphenated(lines, known_words), typical_length) for lines in pages
    ]
    return cleaned, num_removed


def clean_title(raw: object) -> str | None:
    """The metadata title when it reads as one; None for file names, job numbers, "untitled"."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        return None
    title = " ".join(normalize_chars(raw).split())
    title = _FILE_EXT_RE.sub("", _TITLE_PREFIX_RE.sub("", title)).strip()
    letters = sum(1 for c in title if c.isalpha())
    generic = re.sub(r"[\W\d_]+", "", title.casefold()) in _GENERIC_TITLES
    if letters < 2 or generic or len(title) > MAX_TITLE_CHARS or "\ufffd" in title:
        return None
    return title
