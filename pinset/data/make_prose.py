"""Generate pinset's default perplexity text (prose.txt): deterministic English prose from a small grammar.

Why generated: the default text must be shippable with no licence question. Every word list and
template below was written for pinset, and the output is a pure function of the seed, so the file is
the project's own work (same licence as pinset). A random-weight model does not care whether the
text is literature; it needs varied, tokenizable English long enough for several chunks at ctx 2048.

Regenerate with: python -m pinset.data.make_prose > pinset/data/prose.txt
"""

from __future__ import annotations

import random
import sys

PLACES = ["the harbour", "the old mill", "the river bank", "the market square", "the orchard", "the station",
          "the lighthouse", "the library", "the valley", "the bridge", "the workshop", "the high meadow",
          "the ferry landing", "the school house", "the bakery", "the observatory", "the salt marsh", "the quarry"]
PEOPLE = ["the miller", "a young clerk", "the ferryman", "her grandmother", "the carpenter", "a travelling doctor",
          "the stationmaster", "two fishermen", "the teacher", "a tired engineer", "the baker's son", "the mayor",
          "an old sailor", "the gardener", "a surveyor from the city", "the librarian", "the blacksmith", "my cousin"]
VERBS_PAST = ["carried", "repaired", "counted", "painted", "measured", "forgot", "noticed", "remembered",
              "opened", "followed", "described", "weighed", "copied", "mended", "found", "sold", "borrowed", "sketched"]
THINGS = ["a lantern", "the ledger", "a crate of apples", "the broken clock", "a map of the coast", "the wet nets",
          "a letter with no stamp", "the brass compass", "a basket of bread", "the spare wheel", "a box of nails",
          "the weather log", "a bundle of reeds", "the signal flags", "a jar of honey", "the iron key", "a blue coat"]
ADJ = ["quiet", "narrow", "windy", "grey", "bright", "crowded", "cold", "patient", "careful", "stubborn", "gentle",
       "distant", "heavy", "sudden", "warm", "uneven", "familiar", "strange", "late", "early"]
TIMES = ["before dawn", "at noon", "in the evening", "after the rain", "during the long winter", "on market day",
         "when the tide turned", "as the bells rang", "late that autumn", "early in spring", "the next morning",
         "while the kettle boiled", "after supper", "before the storm broke"]
WEATHER = ["The wind came in from the sea", "A thin rain fell across the roofs", "The fog lay low on the water",
           "The sun stood pale over the hills", "Snow gathered along the fences", "The air smelled of salt and smoke",
           "Clouds moved slowly to the east", "The frost had silvered every window"]
THOUGHTS = ["nobody could say why", "it seemed the only sensible thing to do", "the numbers did not add up",
            "the road would be closed by morning", "someone had been there first", "the work was nearly done",
            "the old rules no longer held", "it was better to ask than to guess", "the answer was in the ledger",
            "every small mistake would be counted later", "the town had changed more than it admitted"]
CONNECT = ["Afterwards", "Meanwhile", "For a while", "In the end", "Even so", "Later", "At first", "By then",
           "Without a word", "All the same", "Soon enough", "Once again"]
SPEECH = ["\"We should write it down,\" said {p}.", "\"It will keep until tomorrow,\" {p} replied.",
          "\"Look at the marks on the door,\" said {p}, pointing.", "\"I counted twice,\" {p} said quietly.",
          "\"The tide does not wait for anyone,\" {p} reminded them.", "\"Bring the lamp closer,\" said {p}."]


def sentence(rng: random.Random) -> str:
    p, q = rng.sample(PEOPLE, 2)
    kind = rng.randrange(8)
    if kind == 0:
        s = f"{p} {rng.choice(VERBS_PAST)} {rng.choice(THINGS)} at {rng.choice(PLACES)} {rng.choice(TIMES)}."
    elif kind == 1:
        s = f"{rng.choice(WEATHER)}, and {p} walked to {rng.choice(PLACES)} because {rng.choice(THOUGHTS)}."
    elif kind == 2:
        s = f"{rng.choice(CONNECT)}, {p} and {q} {rng.choice(VERBS_PAST)} {rng.choice(THINGS)} together."
    elif kind == 3:
        s = rng.choice(SPEECH).format(p=p)
    elif kind == 4:
        s = (f"The {rng.choice(ADJ)} road past {rng.choice(PLACES)} was {rng.choice(ADJ)} {rng.choice(TIMES)}, "
             f"and {p} thought that {rng.choice(THOUGHTS)}.")
    elif kind == 5:
        n = rng.randrange(2, 97)
        s = f"There were {n} {rng.choice(['boats', 'houses', 'lamps', 'sacks', 'crates', 'steps', 'trees'])} near {rng.choice(PLACES)}, {rng.choice(['more than', 'fewer than', 'exactly as many as'])} the year before."
    elif kind == 6:
        s = f"{p} kept {rng.choice(THINGS)} in a {rng.choice(ADJ)} room, although {rng.choice(THOUGHTS)}."
    else:
        s = f"{rng.choice(CONNECT)}, {rng.choice(WEATHER).lower()}, and {p} {rng.choice(VERBS_PAST)} {rng.choice(THINGS)}."
    return s[0].upper() + s[1:]


def prose(paragraphs: int = 900, seed: int = 1) -> str:
    rng = random.Random(seed)
    out = []
    for i in range(paragraphs):
        if i % 30 == 0:
            out.append(f"Chapter {i // 30 + 1}")
        out.append(" ".join(sentence(rng) for _ in range(rng.randrange(3, 8))))
    return "\n\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(prose())
