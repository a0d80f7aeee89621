"""Incremental text equals a full decode, and stop strings never reach the stream."""

from __future__ import annotations

import random

import pytest

from engine.detokenizer import IncrementalDetokenizer, StopStrings
from tests.engine.conftest import save_byte_tokenizer

MULTILINGUAL = "Héllo wörld: € 5, 日本語の判決 😀🇩🇪 naïve café — “quoted” ½ ü\n\tend."


@pytest.fixture(scope="module")
def byte_tokenizer(tmp_path_factory):
    """The tiny models' tokenizer: 256 byte tokens, <s> and </s> (special)."""
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("byte-tokenizer")
    save_byte_tokenizer(folder)
    return AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def metaspace_tokenizer():
    """A SentencePiece-style tokenizer (Llama 2, Mistral): '▁' for spaces, byte fallback for
    what the vocabulary lacks, and the text's leading space stripped by the decoder."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pieces = ["▁The", "▁court", "▁is", "▁J", "ag", "els", ",", "▁", "é", "▁caf", "s", "."]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    vocab.update({piece: 259 + i for i, piece in enumerate(pieces)})
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    backend.normalizer = normalizers.Sequence(
        [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
    )
    backend.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    backend.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def _stream(tokenizer, token_ids: list[int]) -> tuple[IncrementalDetokenizer, list[str]]:
    detokenizer = IncrementalDetokenizer(tokenizer)
    deltas = [detokenizer.append(token_id) for token_id in token_ids]
    deltas.append(detokenizer.finish())
    return detokenizer, deltas


def _assert_equivalent(tokenizer, token_ids: list[int]) -> None:
    full = tokenizer.decode(token_ids, skip_special_tokens=True)
    detokenizer = IncrementalDetokenizer(tokenizer)
    for i, token_id in enumerate(token_ids):
        detokenizer.append(token_id)
        # What was shown is never taken back: it starts every later text.
        assert full.startswith(detokenizer.text), (i, token_ids)
    detokenizer.finish()
    assert detokenizer.text == full, token_ids
    assert detokenizer.token_ids == token_ids


def _random_ids(rng: random.Random, vocab_size: int, special: list[int], low: list[int]):
    """Mostly whole tokens, with runs of byte tokens (split characters) and special tokens."""
    ids: list[int] = []
    while len(ids) < rng.randint(1, 60):
        kind = rng.random()
        if kind < 0.15:
            ids.append(rng.choice(special))
        elif kind < 0.55:
            ids.extend(rng.choice(low) for _ in range(rng.randint(1, 4)))
        else:
            ids.append(rng.randrange(vocab_size))
    return ids


def test_byte_tokenizer_matches_a_full_decode(byte_tokenizer):
    text_ids = byte_tokenizer.encode(MULTILINGUAL, add_special_tokens=False)
    _assert_equivalent(byte_tokenizer, text_ids)
    _assert_equivalent(byte_tokenizer, [256, *text_ids[:9], 257, *text_ids[9:], 257])
    rng = random.Random(0)
    for _ in range(300):
        _assert_equivalent(byte_tokenizer, _random_ids(rng, 258, [256, 257], list(range(128, 256))))


def test_split_characters_are_held_until_complete(byte_tokenizer):
    ids = byte_tokenizer.encode("a€b", add_special_tokens=False)  # € is three byte tokens
    _, deltas = _stream(byte_tokenizer, ids)
    assert deltas == ["a", "", "", "€", "b", ""]


def test_metaspace_tokenizer_keeps_its_spaces(metaspace_tokenizer):
    tokenizer = metaspace_tokenizer
    ids = tokenizer.encode("The court is Jagels, The café 日本", add_special_tokens=False)
    _assert_equivalent(tokenizer, ids)
    _assert_equivalent(tokenizer, [1, *ids, 2, *ids])  # a special token first: no lost space
    rng = random.Random(1)
    vocab_size = len(tokenizer)
    for _ in range(300):
        _assert_equivalent(tokenizer, _random_ids(rng, vocab_size, [1, 2], list(range(3, 259))))


@pytest.mark.slow  # reading the tokenizer out of the GGUF file takes ~15 s
def test_default_tokenizer_matches_a_full_decode(default_tokenizer):
    tokenizer = default_tokenizer
    text_ids = tokenizer.encode(MULTILINGUAL * 3, add_special_tokens=False)
    _assert_equivalent(tokenizer, text_ids)
    special = [*sorted(tokenizer.all_special_ids), 3, 7, 16]
    # Byte-level tokens outside printable ASCII, most of them parts of multi-byte characters.
    byte_ids = [tokenizer.convert_tokens_to_ids(char) for char in _byte_chars()]
    rng = random.Random(2)
    for _ in range(300):
        _assert_equivalent(tokenizer, _random_ids(rng, len(tokenizer), special, byte_ids))


def _byte_chars() -> list[str]:
    """GPT-2's stand-ins (the ByteLevel alphabet) for bytes outside printable ASCII, most of
    them parts of multi-byte characters."""
    from tokenizers import pre_tokenizers

    return sorted(char for char in pre_tokenizers.ByteLevel.alphabet() if ord(char) >= 0xA1)


def test_window_stays_short_on_long_outputs(byte_tokenizer):
    """The cost of a token does not grow with the output: each decode sees a few tokens."""
    lengths: list[int] = []

    class CountingBackend:
        def __init__(self, inner):
            self.inner = inner

        def decode(self, ids, **kwargs):
            lengths.append(len(ids))
            return self.inner.decode(ids, **kwargs)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    class Counting:
        def __init__(self, inner):
            self.inner = inner
            self.backend_tokenizer = CountingBackend(inner.backend_tokenizer)
            self.added_tokens_decoder = inner.added_tokens_decoder

        def decode(self, ids, **kwargs):
            lengths.append(len(ids))
            return self.inner.decode(ids, **kwargs)

    ids = byte_tokenizer.encode(MULTILINGUAL * 40, add_special_tokens=False)
    assert len(ids) > 3000
    detokenizer = IncrementalDetokenizer(Counting(byte_tokenizer))
    for token_id in ids:
        detokenizer.append(token_id)
    assert detokenizer.text == byte_tokenizer.decode(ids)
    assert max(lengths) <= 8  # a 4-byte character plus the lead


# ---- stop strings -------------------------------------------------------------------------


def _feed_all(stops: StopStrings, deltas: list[str]) -> list[str]:
    shown = [stops.feed(delta) for delta in deltas]
    shown.append(stops.finish())
    return shown


def test_stop_string_spanning_tokens_is_cut_and_never_streamed():
    deltas = ["The answer", " is 4", "2.\n\n", "Question", ": next"]
    stops = StopStrings(["\n\nQuestion:", "###"])
    shown = _feed_all(stops, deltas)
    assert stops.is_stopped and stops.matched == "\n\nQuestion:"
    assert stops.text == "".join(shown) == "The answer is 42."
    assert all("\n" not in piece for piece in shown)


def test_first_stop_string_wins_and_partial_prefixes_are_released():
    stops = StopStrings(["END", "ab"])
    assert stops.feed("xxE") == "xx"  # "E" may begin "END"
    assert stops.feed("Nz") == "ENz"  # it did not
    assert stops.feed("a") == ""
    assert stops.feed("b and END") == ""
    assert stops.text == "xxENz" and stops.matched == "ab"
    assert stops.feed("more") == "" and stops.finish() == ""


def test_without_a_stop_the_held_tail_comes_out_at_the_end():
    stops = StopStrings(["</answer>"])
    shown = _feed_all(stops, ["Paris </", "ans"])
    assert shown == ["Paris ", "", "</ans"] and not stops.is_stopped
    assert _feed_all(StopStrings([]), ["a", "b"]) == ["a", "b", ""]


def test_stop_strings_on_a_real_token_stream(byte_tokenizer):
    """Character by character (every byte a token), with a multi-byte character in the stop."""
    text = "Le tribunal a décidé. €€ FIN€ de l'arrêt"
    ids = byte_tokenizer.encode(text, add_special_tokens=False)
    detokenizer, stops = IncrementalDetokenizer(byte_tokenizer), StopStrings(["FIN€", "zzz"])
    shown = []
    for token_id in ids:
        shown.append(stops.feed(detokenizer.append(token_id)))
        if stops.is_stopped:
            break
    assert stops.text == "".join(shown) == "Le tribunal a décidé. €€ "
    full = byte_tokenizer.decode(ids)
    assert stops.text == full[: full.find("FIN€")]


def test_stop_strings_agree_with_a_search_of_the_text_so_far():
    """After each delta, as the engine stops: at the first delta whose text so far holds a
    stop string, the text is cut before the earliest one."""
    rng = random.Random(3)
    for _ in range(2000):
        text = "".join(rng.choice("abc\n") for _ in range(rng.randint(0, 30)))
        stops = ["".join(rng.choice("abc\n") for _ in range(rng.randint(1, 4))) for _ in range(2)]
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(1, 8))))
        deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        expected, found = text, False
        for end in (*cuts, len(text)):
            starts = [text[:end].find(s) for s in stops if s in text[:end]]
            if starts:
                expected, found = text[: min(starts)], True
                break
        matcher, shown = StopStrings(stops), ""
        for delta in deltas:
            shown += matcher.feed(delta)
            assert expected.startswith(shown), (text, stops, deltas)
        shown += matcher.finish()
        assert shown == matcher.text == expected, (text, stops, deltas)
        assert matcher.is_stopped == bool(found)
