"""A tiny WordNet for the tests: a few dozen synsets (the words of the tests' texts, their synonyms, hypernyms,
antonyms and head adjectives, irregular forms) written as real WordNet 3.0 dict files, so that nltk's own reader
and every function of bench.data.wordnet, substitutes, tagging and the attack run on it unchanged.

It is shaped like WordNet, not taken from it: the synsets are made up for the tests (no WordNet text is copied).
`write_tiny_wordnet(folder)` writes `folder/corpora/wordnet/`; point `BENCH_WORDNET_DIR` at that folder.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# One synset a line: KEY POS LEMMA[:COUNT]... [@HYPERNYM] [&HEAD] [!LEMMA=KEY/LEMMA]
# POS n, v, a (head adjective), s (satellite: & names its head), r. The first synset that names a lemma is its
# most frequent sense. COUNT is the lemma's tagged frequency (cntlist), which picks a word's part of speech.
# Antonyms are written once and linked both ways.
SPEC = """
movie.n    n movie:10 film:4 picture flick        @show.n
show.n     n show:5
film.n     n film:2 photographic_film             @material.n
material.n n material:6 stuff
film.v     v film:1 shoot
goodness.n n goodness:3 good:2
story.n    n story:8 narrative tale
actor.n    n actor:9 histrion player thespian
music.n    n music:9 tune
charm.n    n charm:4 appeal
plot.n     n plot:6 storyline
drama.n    n drama:5 play
director.n n director:7 manager
scene.n    n scene:6 view
xylophone.n n xylophone:1                         @instrument.n
instrument.n n instrument:5
colonel.n  n colonel:2                            @officer.n
officer.n  n commissioned_military_officer
nebraska.n n Nebraska:1 Cornhusker_State
masterpiece.n n masterpiece:3 classic
comedy.n   n comedy:5 farce
friendship.n n friendship:4 companionship
loss.n     n loss:6 deprivation
dialogue.n n dialogue:3 dialog
character.n n character:5 role
decision.n n decision:6 determination
town.n     n town:7 township
acting.n   n acting:4 playacting
script.n   n script:4 book
ending.n   n ending:4 conclusion
treat.n    n treat:2 delicacy
afternoon.n n afternoon:4 midafternoon
run.n      n run:5 tally
team.n     n team:10 squad
match.n    n match:8 game
bread.n    n bread:9 loaf
soup.n     n soup:7 broth
rain.n     n rain:9 rainfall
storm.n    n storm:6 tempest
chef.n     n chef:5 cook
coach.n    n coach:5 trainer
week.n     n week:12 hebdomad
morning.n  n morning:9 morn
run.v      v run:30 race
walk.v     v walk:20 stroll
spend.v    v spend:10 pass
lose.v     v lose:15 misplace
possess.v  v possess:5 hold
remain.v   v remain:10 stay
win.v      v win:10 triumph
score.v    v score:8 tally
good.a     a good:100                             !good=bad.a/bad
estimable.s s estimable:4 good:10                 &good.a
bad.a      a bad:50
fine.a     a fine:10 okay
great.s    s great:30 outstanding                 &good.a
poor.a     a poor:20                              !poor=rich.a/rich
rich.a     a rich:15
decent.s   s decent:5 nice                        &good.a
happy.a    a happy:20 glad                        !happy=unhappy.a/unhappy
unhappy.a  a unhappy:8
sad.s      s sad:6 sorrowful                      &unhappy.a
idiotic.s  s idiotic:2 stupid                     &bad.a
ugly.a     a ugly:5 unsightly                     !ugly=beautiful.a/beautiful
beautiful.a a beautiful:8 lovely
smart.a    a smart:3 clever
funny.a    a funny:6 comic
thin.a     a thin:5 slender                       !thin=thick.a/thick
thick.a    a thick:6
loud.a     a loud:4 noisy                         !loud=soft.a/soft
soft.a     a soft:7
clumsy.a   a clumsy:3 awkward
slow.a     a slow:6 sluggish                      !slow=fast.a/fast
fast.a     a fast:9 quick
heavy.a    a heavy:9 weighty                      !heavy=light.a/light
light.a    a light:8
strange.a  a strange:5 odd
small.a    a small:9 little                       !small=large.a/large
large.a    a large:10 big
weak.a     a weak:6 feeble                        !weak=strong.a/strong
strong.a   a strong:9
fresh.a    a fresh:8 novel                        !fresh=stale.a/stale
stale.a    a stale:2
cold.a     a cold:10 chilly                       !cold=hot.a/hot
hot.a      a hot:10
salty.a    a salty:3 briny
late.a     a late:10 tardy                        !late=early.a/early
early.a    a early:10
happily.r  r happily:5 merrily                    !happily=unhappily.r/unhappily
unhappily.r r unhappily:2
slowly.r   r slowly:8 easy                        !slowly=quickly.r/quickly
quickly.r  r quickly:9 rapidly
extremely.r r extremely:8 exceedingly
already.r  r already:20
ago.r      r ago:10
sometimes.r r sometimes:12
"""
EXCEPTIONS = {"noun": [], "verb": ["ran run", "running run", "won win", "lost lose"],
              "adj": ["better good", "worse bad"], "adv": []}

FILE_OF = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}
LEXFILE = {"n": 6, "v": 38, "a": 0, "s": 0, "r": 2}  # noun.artifact, verb.motion, adj.all, adv.all
SS_TYPE_NUMBER = {"n": 1, "v": 2, "a": 3, "r": 4, "s": 5}
HEADER = "  1 A tiny WordNet-shaped fixture for clbench's tests (made-up synsets; not WordNet 3.0).\n"


@dataclass
class Synset:
    """One synset of the spec, with its lemmas (name, lex_id, count) and pointers (symbol, key, src, tgt)."""

    key: str
    pos: str
    lemmas: list[tuple[str, int, int]] = field(default_factory=list)
    pointers: list[tuple[str, str, int, int]] = field(default_factory=list)
    offset: int = 0


def parse(spec: str = SPEC) -> dict[str, Synset]:
    """The synsets of spec, keyed, with lex ids assigned and antonym and similar-to links made both ways."""
    synsets: dict[str, Synset] = {}
    seen: dict[tuple[str, int], int] = defaultdict(int)
    links: list[str] = []
    for line in filter(None, (raw.strip() for raw in spec.splitlines())):
        key, pos, *fields = line.split()
        synset = synsets[key] = Synset(key, pos)
        for word in fields:
            if word[0] in "@&!":
                links.append(f"{key} {word}")
                continue
            name, _, count = word.partition(":")
            lex_id = seen[name.lower(), LEXFILE[pos]]
            seen[name.lower(), LEXFILE[pos]] += 1
            synset.lemmas.append((name, lex_id, int(count or 0)))
    for link in links:
        key, word = link.split()
        source, symbol = synsets[key], word[0]
        if symbol == "@":
            source.pointers.append(("@", word[1:], 0, 0))
            synsets[word[1:]].pointers.append(("~", key, 0, 0))
        elif symbol == "&":
            source.pointers.append(("&", word[1:], 0, 0))
            synsets[word[1:]].pointers.append(("&", key, 0, 0))
        else:
            own, _, other = word[1:].partition("=")
            target_key, target_lemma = other.split("/")
            target = synsets[target_key]
            i, j = _lemma_index(source, own), _lemma_index(target, target_lemma)
            source.pointers.append(("!", target_key, i, j))
            target.pointers.append(("!", key, j, i))
    return synsets


def _lemma_index(synset: Synset, name: str) -> int:
    """The 1-based position of lemma name in synset."""
    return [lemma[0] for lemma in synset.lemmas].index(name) + 1


def _data_line(synset: Synset, synsets: dict[str, Synset]) -> str:
    """The synset's line of its data file (offsets as they stand)."""
    words = " ".join(f"{name} {lex_id:x}" for name, lex_id, _ in synset.lemmas)
    pointers = " ".join(f"{symbol} {synsets[key].offset:08d} {synsets[key].pos} {src:02x}{tgt:02x}"
                        for symbol, key, src, tgt in synset.pointers)
    frames = " 01 + 02 00" if synset.pos == "v" else ""
    return (f"{synset.offset:08d} {LEXFILE[synset.pos]:02d} {synset.pos} {len(synset.lemmas):02x} {words} "
            f"{len(synset.pointers):03d}{' ' + pointers if pointers else ''}{frames} | made up for the tests\n")


def _assign_offsets(synsets: dict[str, Synset]) -> None:
    """Give every synset the byte offset of its line in its data file (every offset is 8 digits wide, so the
    line lengths do not depend on the offsets)."""
    position = {name: len(HEADER.encode()) for name in set(FILE_OF.values())}
    for synset in synsets.values():
        synset.offset = position[FILE_OF[synset.pos]]
        position[FILE_OF[synset.pos]] += len(_data_line(synset, synsets).encode())


def sense_key(synset: Synset, lemma: tuple[str, int, int], synsets: dict[str, Synset]) -> str:
    """The WordNet sense key of a lemma of synset (a satellite's names its head's first lemma)."""
    head_name = head_id = ""
    if synset.pos == "s":
        head = synsets[next(key for symbol, key, _, _ in synset.pointers if symbol == "&")]
        head_name, head_id = head.lemmas[0][0], f"{head.lemmas[0][1]:02d}"
    return (f"{lemma[0]}%{SS_TYPE_NUMBER[synset.pos]}:{LEXFILE[synset.pos]:02d}:{lemma[1]:02d}:"
            f"{head_name}:{head_id}").lower()


def write_tiny_wordnet(folder: Path) -> Path:
    """Write the tiny WordNet's dict files (with nltk's `lexnames`) into folder/corpora/wordnet; returns it."""
    from bench.data.wordnet import lexnames_text

    synsets = parse()
    _assign_offsets(synsets)
    target = folder / "corpora" / "wordnet"
    target.mkdir(parents=True, exist_ok=True)
    data: dict[str, list[str]] = {name: [HEADER] for name in set(FILE_OF.values())}
    index: dict[tuple[str, str], list[Synset]] = defaultdict(list)
    senses, counts = [], []
    for synset in synsets.values():
        data[FILE_OF[synset.pos]].append(_data_line(synset, synsets))
        for lemma in synset.lemmas:
            index[lemma[0].lower(), FILE_OF[synset.pos]].append(synset)
    for (word, file), entries in index.items():
        for number, synset in enumerate(entries, 1):
            lemma = next(lemma for lemma in synset.lemmas if lemma[0].lower() == word)
            key = sense_key(synset, lemma, synsets)
            senses.append(f"{key} {synset.offset:08d} {number} {lemma[2]}\n")
            counts.append(f"{key} {number} {lemma[2]}\n")
    for file, lines in data.items():
        (target / f"data.{file}").write_text("".join(lines), encoding="utf-8")
        rows = []
        for (word, in_file), entries in sorted(index.items()):
            if in_file == file:
                symbols = sorted({symbol for synset in entries for symbol, *_ in synset.pointers})
                offsets = " ".join(f"{synset.offset:08d}" for synset in entries)
                rows.append(f"{word} {'a' if file == 'adj' else entries[0].pos} {len(entries)} {len(symbols)} "
                            f"{' '.join(symbols) + ' ' if symbols else ''}{len(entries)} 0 {offsets}  \n")
        (target / f"index.{file}").write_text("".join(rows), encoding="utf-8")
        (target / f"{file}.exc").write_text("".join(f"{line}\n" for line in EXCEPTIONS[file]), encoding="utf-8")
    (target / "index.sense").write_text("".join(sorted(senses)), encoding="utf-8")
    (target / "cntlist.rev").write_text("".join(sorted(counts)), encoding="utf-8")
    (target / "lexnames").write_text(lexnames_text(), encoding="utf-8")
    return target
