from pipelines.repetition import before_loop, is_looping, max_phrase_repeats

LOOP = "James Dowd, Judge. The document is Jagels. " + "The court is Jagels, " * 23


def test_a_phrase_of_five_words_more_than_twice_is_a_loop() -> None:
    assert max_phrase_repeats(LOOP) == 23
    assert is_looping(LOOP)
    twice = "The rent is due monthly. The rent is due monthly, as agreed."
    assert max_phrase_repeats(twice) == 2 and not is_looping(twice)


def test_the_text_before_the_loop_ends_at_a_sentence_end() -> None:
    assert before_loop(LOOP) == "James Dowd, Judge. The document is Jagels."
    parties = "The parties to this agreement are the parties to this agreement are " * 5
    assert before_loop(parties) == ""
    fine = "Delaware law governs [p. 12]."
    assert before_loop(fine) == fine


def test_the_cut_keeps_a_sentence_s_citation_whole() -> None:
    text = "Rent is 900 dollars. [p. 1] " + "The tenant pays the rent monthly. " * 3
    assert before_loop(text) == "Rent is 900 dollars. [p. 1] The tenant pays the rent monthly."
    cited = "Rent is due. [pp. 1-2] [Lease, p. 3]\n" + "Rent is due on the first day. " * 3
    assert before_loop(cited).startswith("Rent is due. [pp. 1-2] [Lease, p. 3]")
