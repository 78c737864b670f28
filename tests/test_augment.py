"""WordNet loading and the deterministic synonym / antonym views (bench.data.wordnet, bench.data.augment).

The view tests run twice: on the tiny WordNet of tests/tinywordnet.py (everywhere) and on the machine's own
(`real_wordnet`, skipped without one); the tiny one holds the words of these texts, shaped as WordNet has them."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.data import augment, substitutes, tagging
from bench.data.augment import (Augmented, antonym_view, augment_texts, replacement_count, synonym_view,
                                training_vocabulary)
from bench.data.substitutes import inflect, synonym_candidates
from bench.data.tagging import pos_tags
from bench.data.words import STOP_WORDS, case_style, split_token
from bench.errors import BenchError
from bench.data import wordnet
from bench.data.wordnet import lexnames_text, load_wordnet, prepare_copy

TEXTS = [
    "Good, the movie is GREAT and the actors were running happily .",
    "idiotic and ugly .",
    "the movie is amateurish , but it's a minor treat .",
    "even if the original remains the real masterpiece , the film possesses its own languorous charm .",
    "a funny , touching and smart comedy about friendship and loss .",
    "the plot is thin , the dialogue clumsy and the music loud .",
    "not a bad way to spend an afternoon , if you like slow stories .",
    "the director never loses sight of the characters or their heavy decisions .",
    "it's a beautiful , sad and strange film about a small town .",
    "(Terrible) acting, WEAK script -- and yet the ending works !",
]


@pytest.fixture(autouse=True)
def wordnet_tagger(monkeypatch):
    """The WordNet part-of-speech fallback, even where a spaCy model is installed."""
    monkeypatch.setattr(tagging, "_spacy_model", lambda: None)


def wordnet_pos(tag: str) -> str:
    return tagging.WORDNET_POS[tag]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def changed(original: str, view: Augmented) -> list[int]:
    """Indices of the tokens that differ from the original text's."""
    return [i for i, (a, b) in enumerate(zip(original.split(), view.tokens)) if a != b]


# ---------------------------------------------------------------- WordNet loading (no WordNet needed)

def test_lexnames_table_is_the_wordnet_30_one():
    lines = lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3"
    rows = {name: (number, category) for number, name, category in (line.split("\t") for line in lines)}
    assert rows["noun.Tops"] == ("03", "1")
    assert rows["verb.weather"] == ("43", "2")
    assert rows["adj.ppl"] == ("44", "3")
    assert rows["adv.all"] == ("02", "4")
    assert [line.split("\t")[0] for line in lines] == [f"{i:02d}" for i in range(45)]


def test_prepare_copy_makes_real_files_and_lexnames(tmp_path):
    source, target = tmp_path / "dict", tmp_path / "root" / "corpora" / "wordnet"
    source.mkdir()
    (source / "index.noun").write_text("idx")
    (source / "subfolder").mkdir()
    prepare_copy(source, target)
    prepare_copy(source, target)  # a second call finds everything in place
    assert (target / "index.noun").read_text() == "idx"
    assert not (target / "index.noun").is_symlink()
    assert (target / "lexnames").read_text() == lexnames_text()
    assert sorted(p.name for p in target.iterdir()) == ["index.noun", "lexnames"]


def test_missing_wordnet_says_how_to_install(monkeypatch, tmp_path):
    import nltk

    def no_data(resource, *args, **kwargs):
        raise LookupError(resource)

    monkeypatch.setattr(wordnet, "DEBIAN_DIR", tmp_path / "empty")
    monkeypatch.setattr(nltk.data, "find", no_data)
    # The undecorated loader: the cached readers other tests use stay in place.
    with pytest.raises(BenchError, match="apt-get install wordnet-base wordnet-sense-index") as info:
        wordnet._load.__wrapped__(None)
    assert "\n" not in str(info.value)
    assert "nltk.downloader wordnet" in str(info.value)


def test_bench_wordnet_dir_is_used_alone_and_none_hides_wordnet(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_WORDNET_DIR", "none")
    with pytest.raises(BenchError, match="hidden .BENCH_WORDNET_DIR=none.*apt-get install wordnet-base"):
        load_wordnet()
    monkeypatch.setenv("BENCH_WORDNET_DIR", str(tmp_path))
    with pytest.raises(BenchError, match=f"BENCH_WORDNET_DIR={tmp_path} is not a WordNet dict folder .no index.noun"):
        load_wordnet()


def test_a_dict_folder_without_lexnames_is_read_from_a_prepared_copy(monkeypatch, tmp_path):
    tiny = load_wordnet()
    plain = tmp_path / "dict"
    shutil.copytree(tiny.root.path if hasattr(tiny.root, "path") else str(tiny.root), plain)
    (plain / "lexnames").unlink()
    monkeypatch.setenv("BENCH_WORDNET_DIR", str(plain))
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    copied = load_wordnet()
    assert copied is not tiny and copied.synsets("movie") and Path(str(copied.root)).is_relative_to(tmp_path / "cache")
    assert (Path(str(copied.root)) / "lexnames").read_text() == lexnames_text()


def test_word_caches_are_kept_per_wordnet(monkeypatch):
    assert substitutes.antonym_candidates("good", "ADJ") == ("bad",)
    monkeypatch.setenv("BENCH_WORDNET_DIR", "none")
    with pytest.raises(BenchError, match="hidden"):
        substitutes.antonym_candidates("good", "ADJ")  # not the tiny WordNet's cached answer


# ---------------------------------------------------------------- tokens (no WordNet needed)

def test_split_token_and_case_style():
    assert split_token("(Good),") == ("(", "Good", "),")
    assert split_token("--") == ("--", "", "")
    assert split_token("it's") == ("", "it's", "")
    assert [case_style(w) for w in ("good", "Good", "GOOD", "G")] == ["lower", "title", "upper", "title"]


def test_regular_inflection_spelling():
    pairs = [("film", "s", "films"), ("box", "s", "boxes"), ("city", "s", "cities"), ("day", "s", "days"),
             ("run", "ing", "running"), ("make", "ing", "making"), ("die", "ing", "dying"),
             ("visit", "ing", "visiting"), ("stop", "ed", "stopped"), ("copy", "ed", "copied"),
             ("move", "ed", "moved"), ("play", "ed", "played"), ("go", "", "go")]
    assert [inflect(base, suffix) for base, suffix, _ in pairs] == [form for _, _, form in pairs]


def test_replacement_count_rounds_half_up_and_keeps_one():
    assert replacement_count(0.4, 10) == 4
    assert replacement_count(0.5, 5) == 3
    assert replacement_count(0.2, 7) == 1
    assert replacement_count(0.01, 7) == 1
    assert replacement_count(0.0, 7) == 0
    assert replacement_count(1.0, 7) == 7
    assert replacement_count(0.4, 0) == 0


def test_training_vocabulary_is_sorted_content_words():
    assert training_vocabulary(["The Movie, not bad!", "a movie 42 it's"]) == ["bad", "movie"]


# ---------------------------------------------------------------- part of speech

def test_pos_tags_wordnet_fallback(wn):
    tokens = "Good, the movie is not running happily .".split()
    assert pos_tags(tokens) == ["ADJ", "OTHER", "NOUN", "OTHER", "OTHER", "VERB", "ADV", "OTHER"]
    assert pos_tags(["xqzzy", "42", "", "never"]) == ["OTHER"] * 4


# ---------------------------------------------------------------- views

@pytest.mark.parametrize("kind", augment.KINDS)
def test_views_are_deterministic_per_seed(wn, kind):
    first = augment_texts(TEXTS, kind, 0.4, seed=3)
    assert augment_texts(TEXTS, kind, 0.4, seed=3) == first
    assert augment_texts(TEXTS, kind, 0.4, seed=4) != first
    assert all(isinstance(view, Augmented) for view in first)


def test_views_do_not_depend_on_the_rest_of_the_batch(wn):
    assert augment_texts(TEXTS[:4], "syn", 0.4, seed=1) == augment_texts(TEXTS, "syn", 0.4, seed=1)[:4]


@pytest.mark.parametrize("kind", augment.KINDS)
def test_only_content_words_change(wn, kind):
    for seed in range(3):
        for text, view in zip(TEXTS, augment_texts(TEXTS, kind, 0.5, seed)):
            tokens = text.split()
            assert len(view.tokens) == len(tokens) == len(view.replaced)
            assert view.text == " ".join(view.tokens)
            assert [i for i, flag in enumerate(view.replaced) if flag] == changed(text, view)
            tags = pos_tags(tokens)
            for i in changed(text, view):
                core = split_token(tokens[i])[1]
                assert tags[i] != "OTHER" and core.lower() not in STOP_WORDS and core.isalpha()


def test_synonyms_are_wordnet_synonyms_or_hypernyms(wn):
    checked = 0
    for seed in range(3):
        for text in TEXTS:
            tokens, view = text.split(), synonym_view(text, 1.0, rng(seed))
            tags = pos_tags(tokens)
            for i in changed(text, view):
                word, new = split_token(tokens[i])[1].lower(), split_token(view.tokens[i])[1].lower()
                pos = wordnet_pos(tags[i])
                synsets = wn.synsets(word, pos)
                related = synsets + [b for s in synsets for b in s.hypernyms() + s.instance_hypernyms()
                                     + s.similar_tos()]
                names = {lemma.name().lower() for s in related for lemma in s.lemmas()}
                suffix = substitutes.inflection(word, wn.morphy(word, pos), tags[i])
                assert new in {inflect(name, suffix) for name in names}, (word, new)
                assert new != word
                checked += 1
    assert checked > 30


def antonyms_in_wordnet(wn, word: str, tag: str) -> set[str]:
    """Every antonym name WordNet links to the word's synsets (or their head adjectives)."""
    synsets = wn.synsets(word, wordnet_pos(tag))
    heads = [h for s in synsets for h in s.similar_tos()]
    return {a.name().lower() for s in synsets + heads for lemma in s.lemmas() for a in lemma.antonyms()}


def test_antonym_view_uses_wordnet_antonyms_else_vocabulary(wn):
    text = "Good, GOOD movie and (good) xylophone ."
    view = antonym_view(text, 1.0, rng(), vocabulary=["zebra", "movie"])
    tokens = text.split()
    assert view.replaced == (True, True, True, False, True, True, False)
    good = antonyms_in_wordnet(wn, "good", "ADJ")
    assert {"bad", "evil"} & good
    first, second, third = view.tokens[0], view.tokens[1], view.tokens[4]
    assert first.endswith(",") and first[:-1] == first[:-1].title() and first[:-1].lower() in good
    assert second == second.upper() and second.lower() in good
    assert third.startswith("(") and third.endswith(")") and third[1:-1] in good
    assert antonyms_in_wordnet(wn, "movie", "NOUN") == set()
    assert view.tokens[2] == "zebra"  # no antonym: a vocabulary word other than the original
    assert view.tokens[5] in {"zebra", "movie"}
    assert tokens[3] == view.tokens[3] and tokens[6] == view.tokens[6]


def test_antonym_view_prefers_antonyms_in_a_dataset(wn):
    texts = ["a good movie", "a bad film", "slowly and quickly"]
    views = augment_texts(texts, "ant", 1.0, seed=0)
    assert views[0].tokens[1] in antonyms_in_wordnet(wn, "good", "ADJ")
    assert views[2].tokens[0] in antonyms_in_wordnet(wn, "slowly", "ADV")
    assert views[2].tokens[2] in antonyms_in_wordnet(wn, "quickly", "ADV")
    vocabulary = set(training_vocabulary(texts))
    for view, text in zip(views, texts):
        for i in changed(text, view):
            word = text.split()[i]
            assert view.tokens[i] in vocabulary | antonyms_in_wordnet(wn, word, pos_tags([word])[0])


def test_capitalisation_and_punctuation_are_kept(wn):
    text = "(Movie), MOVIE movie! Film... 'film'"
    view = synonym_view(text, 1.0, rng())
    assert all(view.replaced)
    for old, new in zip(text.split(), view.tokens):
        (lead, core, trail), (new_lead, new_core, new_trail) = split_token(old), split_token(new)
        assert (lead, trail) == (new_lead, new_trail)
        assert case_style(new_core) == case_style(core) and new_core.lower() != core.lower()


def test_rate_is_respected(wn):
    words = "movie film story actor music charm plot drama director scene".split()
    assert pos_tags(words) == ["NOUN"] * 10 and all(synonym_candidates(w, "NOUN") for w in words)
    text = "the " + " and the ".join(words) + " ."
    for rate, expected in [(0.4, 4), (0.2, 2), (1.0, 10), (0.0, 0), (0.01, 1)]:
        for seed in range(3):
            assert sum(synonym_view(text, rate, rng(seed)).replaced) == expected
            assert sum(antonym_view(text, rate, rng(seed), ["zebra"]).replaced) == expected


def test_words_without_candidates_are_skipped(wn):
    assert pos_tags(["already", "ago", "sometimes"]) == ["ADV"] * 3
    assert not any(synonym_candidates(w, "ADV") for w in ("already", "ago", "sometimes"))
    text = "already ago sometimes movie"
    for seed in range(5):  # 4 content words at 0.25: one replacement, always the only word with synonyms
        assert synonym_view(text, 0.25, rng(seed)).replaced == (False, False, False, True)
    assert synonym_view("already ago", 1.0, rng()).replaced == (False, False)


def test_inflection_candidates_are_other_forms_of_the_same_base(wn):
    assert substitutes.inflection_candidates("films", "NOUN") == ("film",)
    assert substitutes.inflection_candidates("film", "NOUN") == ("films",)
    assert set(substitutes.inflection_candidates("walked", "VERB")) == {"walk", "walks", "walking"}
    assert set(substitutes.inflection_candidates("ran", "VERB")) == {"run", "runs", "running"}  # never "runned"
    assert substitutes.inflection_candidates("happy", "ADJ") == () and substitutes.inflection_candidates("xqzzy", "NOUN") == ()
    assert substitutes.inflection_candidates("nebraska", "NOUN") == ()  # a proper name only


def test_syn_inflect_view_changes_the_form_of_words_without_synonyms(wn, monkeypatch):
    text = "the films were walking"
    assert pos_tags(text.split()) == ["OTHER", "NOUN", "OTHER", "VERB"]
    monkeypatch.setattr(substitutes, "synonym_candidates", lambda word, tag: ())  # as if WordNet had none
    assert synonym_view(text, 1.0, rng()).replaced == (False, False, False, False)
    view = synonym_view(text, 1.0, rng(), inflections=True)
    assert view.replaced == (False, True, False, True)
    assert view.tokens[1] == "film" and view.tokens[3] in {"walk", "walks", "walked"}
    monkeypatch.undo()  # with synonyms at hand, those come first: the same views from the same random stream
    assert augment_texts(TEXTS, "syn-inflect", 0.4, seed=2) == augment_texts(TEXTS, "syn", 0.4, seed=2)
    texts = [*TEXTS, "the colonels said no"]  # WordNet has no single-word synonym or hypernym of colonel
    assert synonym_candidates("colonels", "NOUN") == ()
    plain, inflected = augment_texts(texts, "syn", 1.0, 2), augment_texts(texts, "syn-inflect", 1.0, 2)
    assert plain[:-1] == inflected[:-1] and inflected[-1].tokens[1] == "colonel" and not plain[-1].replaced[1]


def test_cache_round_trip(wn, tmp_path, monkeypatch):
    first = augment_texts(TEXTS, "syn", 0.4, seed=0, cache_dir=tmp_path)
    files = list(tmp_path.glob("*.jsonl.gz"))
    assert len(files) == 1 and not list(tmp_path.glob("*.tmp"))
    with gzip.open(files[0], "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    assert len(rows) == len(TEXTS) and rows[0]["tokens"] == list(first[0].tokens)

    def recomputed(*args, **kwargs):
        raise AssertionError("recomputed instead of read from the cache")

    monkeypatch.setattr(augment, "synonym_view", recomputed)
    assert augment_texts(TEXTS, "syn", 0.4, seed=0, cache_dir=tmp_path) == first
    with pytest.raises(AssertionError, match="recomputed"):
        augment_texts(TEXTS, "syn", 0.4, seed=1, cache_dir=tmp_path)  # another seed: another file


def test_corrupt_cache_is_recomputed(wn, tmp_path):
    first = augment_texts(TEXTS, "ant", 0.2, seed=0, cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.jsonl.gz")
    path.write_bytes(b"not gzip")
    assert augment_texts(TEXTS, "ant", 0.2, seed=0, cache_dir=tmp_path) == first
    assert len(gzip.open(path, "rt").read().splitlines()) == len(TEXTS)


def test_bad_arguments():
    with pytest.raises(ValueError, match="kind"):
        augment_texts(["a"], "hyp", 0.4, 0)
    with pytest.raises(BenchError, match="rate"):
        augment_texts(["a"], "syn", 1.5, 0)


def test_the_released_cline_quota_replaces_half_of_all_words_at_most_every_content_word():
    # CLINE's released replace_word: int(0.5 x words), capped by the candidate (content) words
    assert replacement_count(0.5, 3, n_tokens=4, quota="tokens") == 2
    assert replacement_count(0.5, 2, n_tokens=10, quota="tokens") == 2
    assert replacement_count(0.5, 1, n_tokens=1, quota="tokens") == 0   # int(0.5): a one-word text keeps its word
    assert replacement_count(0.5, 5, n_tokens=9, quota="tokens") == 4   # rounded down, not half up
    assert replacement_count(0.5, 5, n_tokens=9) == 3                   # the content rule: half of 5, half up


@pytest.mark.parametrize("kind", ["syn", "ant"])
def test_views_record_their_candidate_words_and_keep_them_in_the_cache(kind, tmp_path):
    views = augment_texts(TEXTS, kind, 0.5, seed=0, cache_dir=tmp_path, quota="tokens")
    for text, view in zip(TEXTS, views):
        tokens = text.split()
        content = set(tagging.content_positions(pos_tags(tokens)))
        assert view.candidate == tuple(i in content for i in range(len(tokens)))
        assert all(c for r, c in zip(view.replaced, view.candidate) if r)  # only candidates are replaced
        assert sum(view.replaced) <= max(replacement_count(0.5, len(content), len(tokens), "tokens"), 0)
    assert augment_texts(TEXTS, kind, 0.5, seed=0, cache_dir=tmp_path, quota="tokens") == views
    augment_texts(TEXTS, kind, 0.5, seed=0, cache_dir=tmp_path)  # the other rule is cached apart
    assert len(list(tmp_path.glob(f"{kind}-*.jsonl.gz"))) == 2
    with pytest.raises(ValueError, match="quota must be one of"):
        augment_texts(TEXTS, kind, 0.5, seed=0, quota="half")


# ---------------------------------------------------------------- CLINE's released antonym draw (antonym_share)

# "good" has antonyms in WordNet (bad ...); "film" has none. The training vocabulary is {film, good}, so a
# random-word view swaps the two words, and a view that tried antonyms holds an antonym of "good" only.
GOOD_FILM = ["the good film ."] * 200


def reference_tries(seed: int, count: int, share: float) -> list[bool]:
    """The released ANTONYM_RATIO test per text, brute force: a uniform draw of the text's own share stream,
    entropy (seed, index, 1 = `ant`, 1 = the share stream), below the share."""
    return [bool(np.random.default_rng([seed, i, 1, 1]).random() < share) for i in range(count)]


def tried_antonyms(view: Augmented, wn) -> bool:
    """What the view shows: antonyms only (one word, an antonym of `good`: the quota is 2, and no random word
    tops it up), or the random-word view (both words swapped, the quota filled)."""
    if view.tokens[2] == "film":
        assert view.replaced == (False, True, False, False) and view.tokens[1] in antonyms_in_wordnet(wn, "good", "ADJ")
        return True
    assert view.tokens == ("the", "film", "good", ".") and view.replaced == (False, True, True, False), view
    return False


def test_the_released_antonym_draw_tries_antonyms_for_a_seeded_share_of_the_texts(wn):
    views = augment_texts(GOOD_FILM, "ant", 0.5, seed=0, quota="tokens", antonym_share=0.5)
    tries = [tried_antonyms(view, wn) for view in views]
    assert tries == reference_tries(0, len(GOOD_FILM), 0.5) == [augment.tries_antonyms(0, i, 0.5)
                                                               for i in range(len(GOOD_FILM))]
    assert sum(tries) == 109  # about half: this seed's exact draw
    again = augment_texts(GOOD_FILM, "ant", 0.5, seed=0, quota="tokens", antonym_share=0.5)
    assert [tried_antonyms(v, wn) for v in again] == tries  # the same seed, the same split
    other = [tried_antonyms(v, wn) for v in augment_texts(GOOD_FILM, "ant", 0.5, seed=1, quota="tokens",
                                                            antonym_share=0.5)]
    assert other == reference_tries(1, len(GOOD_FILM), 0.5) and other != tries and sum(other) == 102
    # a text's draw depends on the seed and its index only, not on the other texts
    assert augment_texts(GOOD_FILM[:37], "ant", 0.5, seed=0, quota="tokens", antonym_share=0.5) == views[:37]
    for share, expected in ((1.0, True), (0.0, False)):
        assert {tried_antonyms(v, wn) for v in augment_texts(GOOD_FILM[:20], "ant", 0.5, 0, quota="tokens",
                                                             antonym_share=share)} == {expected}


def test_a_text_without_antonyms_gets_the_random_word_view_even_when_it_tries(wn):
    texts = ["the movie and the story ."] * 10 + ["a good film ."]
    vocabulary = set(training_vocabulary(texts))
    tokens = texts[0].split()
    assert replacement_count(0.5, len(tagging.content_positions(pos_tags(tokens))), len(tokens), "tokens") == 2
    for view in augment_texts(texts, "ant", 0.5, seed=0, quota="tokens", antonym_share=1.0)[:10]:
        assert sum(view.replaced) == 2  # the quota filled, by vocabulary words
        assert all(view.tokens[i] in vocabulary and view.tokens[i] != tokens[i] for i in changed(texts[0], view))


def test_the_paper_antonym_view_is_unchanged_antonyms_wherever_wordnet_has_one(wn):
    """antonym_share None (`variant: paper`, dcl): word by word, an antonym where WordNet has one, else a
    vocabulary word, so one view mixes both; and its cache is kept apart from the released draw's."""
    views = augment_texts(GOOD_FILM[:20], "ant", 0.5, seed=0, quota="tokens")
    for view in views:  # an antonym of good, and film by the other vocabulary word
        assert view.tokens[1] in antonyms_in_wordnet(wn, "good", "ADJ") and view.tokens[2] == "good"
    assert views == [antonym_view(text, 0.5, augment.text_rng(0, i, "ant"), ["film", "good"], "tokens")
                     for i, text in enumerate(GOOD_FILM[:20])]


def test_the_released_draw_is_cached_apart_and_checked(wn, tmp_path):
    released = augment_texts(GOOD_FILM[:20], "ant", 0.5, 0, cache_dir=tmp_path, quota="tokens", antonym_share=0.5)
    paper = augment_texts(GOOD_FILM[:20], "ant", 0.5, 0, cache_dir=tmp_path, quota="tokens")
    assert released != paper and len(list(tmp_path.glob("ant-*.jsonl.gz"))) == 2
    assert augment_texts(GOOD_FILM[:20], "ant", 0.5, 0, cache_dir=tmp_path, quota="tokens",
                         antonym_share=0.5) == released
    augment_texts(GOOD_FILM[:20], "ant", 0.5, 0, cache_dir=tmp_path, quota="tokens", antonym_share=0.25)
    assert len(list(tmp_path.glob("ant-*.jsonl.gz"))) == 3  # each share its own views
    for kind, share in (("syn", 0.5), ("ant", 1.5), ("ant", -0.1)):
        with pytest.raises(ValueError, match="antonym_share"):
            augment_texts(["a good film"], kind, 0.5, 0, antonym_share=share)


def test_the_tokens_quota_counts_whitespace_words_punctuation_attached(wn):
    """docs/METHODS.md, cline: 7 whitespace words, 4 content words: int(0.5 x 7) = 3 replaced; the released
    code counts 9 spaCy tokens (the comma and the full stop are tokens) and replaces int(4.5) = 4."""
    text = "The plot is thin, the dialogue clumsy."
    tokens = text.split()
    assert len(tokens) == 7 and len(tagging.content_positions(pos_tags(tokens))) == 4
    assert replacement_count(0.5, 4, n_tokens=7, quota="tokens") == 3
    assert replacement_count(0.5, 4, n_tokens=9, quota="tokens") == 4
    for seed in range(3):
        assert sum(augment_texts([text], "syn", 0.5, seed, quota="tokens")[0].replaced) == 3


# ---------------------------------------------------------------- a random word equal to the original (redraw_same)

# "movie" and "film" have no WordNet antonym: with antonym share 0 every view is the random-word view, its
# words drawn from the training vocabulary {film, movie}, so each draw is the word itself half of the time.
# 6 words, 2 content words: the released quota int(0.5 x 6) = 3 is capped at 2, every content word.
MOVIE_FILM = "the movie and the film ."


def first_draw(seed: int) -> tuple[int, str]:
    """The content word tried first in the view of text 0 and the vocabulary word drawn for it, replayed from the
    text's random stream: a permutation of its 2 content words, then one draw per word tried."""
    rng = augment.text_rng(seed, 0, "ant")
    position = (1, 4)[int(rng.permutation(2)[0])]
    return position, ["film", "movie"][int(rng.integers(2))]


def test_a_random_word_equal_to_the_original_is_skipped_by_the_released_rule_and_drawn_again_otherwise(wn):
    """CLINE's released search_replacement draws one random word per candidate word and skips the word when the
    draw is the word itself: no second draw, and with every candidate tried no other word takes its place
    (`redraw_same=False`). `redraw_same=True` (variant paper, and this project before) draws again."""
    tokens = MOVIE_FILM.split()
    assert tagging.content_positions(pos_tags(tokens)) == [1, 4] and training_vocabulary([MOVIE_FILM]) == ["film",
                                                                                                         "movie"]
    seed = next(s for s in range(100) if first_draw(s)[1] == tokens[first_draw(s)[0]])  # the draw is the word
    kept = first_draw(seed)[0]
    views = {redraw: augment_texts([MOVIE_FILM], "ant", 0.5, seed, quota="tokens", antonym_share=0.0,
                                   redraw_same=redraw)[0] for redraw in (False, True)}
    assert views[False].tokens[kept] == tokens[kept] and not views[False].replaced[kept]  # skipped, not drawn again
    assert [i for i, r in enumerate(views[False].replaced) if r] in ([], [5 - kept])  # nothing in its place
    assert views[True].tokens == ("the", "film", "and", "the", "movie", ".")  # drawn again: both words swapped
    assert views[True].replaced == (False, True, False, False, True, False)
    for redraw in (False, True):  # the paper's antonym view falls back on the same random words
        paper = augment_texts([MOVIE_FILM], "ant", 0.5, seed, quota="tokens", redraw_same=redraw)[0]
        assert paper.tokens[kept] == (tokens[kept] if not redraw else {"movie": "film", "film": "movie"}[tokens[kept]])


def test_the_skipping_rule_is_cached_apart(wn, tmp_path):
    redrawn = augment_texts([MOVIE_FILM] * 20, "ant", 0.5, 0, cache_dir=tmp_path, quota="tokens", antonym_share=0.5)
    skipped = augment_texts([MOVIE_FILM] * 20, "ant", 0.5, 0, cache_dir=tmp_path, quota="tokens", antonym_share=0.5,
                            redraw_same=False)
    assert redrawn != skipped and len(list(tmp_path.glob("ant-*.jsonl.gz"))) == 2
    with pytest.raises(ValueError, match="redraw_same"):
        augment_texts([MOVIE_FILM], "syn", 0.5, 0, redraw_same=False)
