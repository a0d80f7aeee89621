"""Repeated phrases in a model's text: how often the worst one occurs, and the text before a loop.

A phrase is `PHRASE_WORDS` consecutive words, compared without case and punctuation. Issue 11's
rule is that no phrase of 5+ words occurs more than twice; a text that breaks it is a decoding
loop ("The court is Jagels, The court is Jagels, ..."), whatever the engine did to stop it.
"""

from __future__ import annotations

import re
from collections import Counter

PHRASE_WORDS = 5
MAX_PHRASE_REPEATS = 2
# A word: letters and digits with inner apostrophes; pipelines.summary.support uses it too.
WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
# A sentence's end, with the page citations that follow it ("... words. [p. 1]"); never the
# stop of a citation's own "p." or "pp.".
_SENTENCE_END = re.compile(r"(?<!\[p)(?<!\[pp)[.!?](?:\s*\[[^\[\]\n]{0,80}\])*(?=\s|$)")


def _words(text: str) -> list[re.Match[str]]:
    return list(WORD.finditer(text))


def max_phrase_repeats(text: str, n: int = PHRASE_WORDS) -> int:
    """How many times the most repeated phrase of `n` words occurs in `text` (0 if none)."""
    words = [match.group(0).casefold() for match in _words(text)]
    phrases = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return max(phrases.values(), default=0)


def is_looping(text: str, n: int = PHRASE_WORDS) -> bool:
    return max_phrase_repeats(text, n) > MAX_PHRASE_REPEATS


def before_loop(text: str, n: int = PHRASE_WORDS) -> str:
    """`text` cut before its first loop: up to the last sentence end before the second time the
    first over-repeated phrase occurs. The whole text when nothing repeats too often; "" when
    the loop starts in the first sentence."""
    matches = _words(text)
    words = [match.group(0).casefold() for match in matches]
    phrases = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    looping = {phrase for phrase, count in phrases.items() if count > MAX_PHRASE_REPEATS}
    if not looping:
        return text
    seen: set[tuple[str, ...]] = set()
    for i in range(len(words) - n + 1):
        phrase = tuple(words[i : i + n])
        if phrase in looping and phrase in seen:
            cut = matches[i].start()
            ends = [end.end() for end in _SENTENCE_END.finditer(text, 0, cut)]
            return text[: ends[-1]].rstrip() if ends else ""
        seen.add(phrase)
    return text  # unreachable: a phrase counted more than twice is seen twice
