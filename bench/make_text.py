#!/usr/bin/env python3
"""Writes deterministic English-like text for tokenizer benchmarks.

    make_text.py OUT [--mb 4] [--seed 1]

Sentences of common words with the things real prose has and tokenizers must
handle: capitals, names, contractions, numbers (years, decimals, thousands),
dialogue in quotes, commas, semicolons, questions, paragraphs, and a little
non-ASCII (accented words, dashes, curly quotes). The same arguments always
give the same bytes, so brisk and the peer tokenize identical input. The text
is generated, not shipped: nothing large is committed."""
import argparse
import random

WORDS = """the of and to a in is it that was he for on are as with his they at be this
from have or by one had not but what all were when we there can an your which their
said if do will each about how up out them then she many some so these would other
into has more her two like him see time could no make than first been its who now
people my made over did down only way find use may water long little very after
words called just where most know get through back much go good new write our me
man too any day same right look think also around another came come work three
word must because does part even place well such here take why things help put
years different away again off went old number great tell men say small every
found still between name should home big give air line set own under read last
never us left end along while might next sound below saw something thought both few
those always looked show large often together asked house world going want school
important until form food keep children feet land side without boy once animals life
enough took sometimes four head above kind began almost live page got earth need far
hand high year mother light parts country father let night following picture being
study second eyes soon times story boys since white days ever paper hard near
sentence better best across during today others however sure means knew try told
young miles sun ways thing whole hear example heard several change answer room sea
against top turned learn point city play toward five using himself usually money
seen car morning river garden window quiet bright morning dark cold warm green""".split()

NAMES = ["Alice", "Tom", "Marguerite", "Dr. Patel", "Mr. Lin", "Oxford", "London",
         "Kyoto", "the Thames", "Mrs. O'Brien", "Zoë", "José", "Müller", "Renée"]
CONTRACTIONS = ["don't", "it's", "I'm", "we'll", "couldn't", "she'd", "they're",
                "won't", "that's", "you've", "isn't", "o'clock"]
ACCENTED = ["café", "naïve", "façade", "résumé", "déjà vu", "jalapeño", "über"]


def number(r):
    k = r.randrange(6)
    if k == 0:
        return str(r.randrange(1500, 2030))
    if k == 1:
        return f"{r.randrange(1, 100)}.{r.randrange(0, 100):02d}"
    if k == 2:
        return f"{r.randrange(1, 999)},{r.randrange(0, 1000):03d}"
    if k == 3:
        return f"{r.randrange(2, 60)}%"
    if k == 4:
        return f"${r.randrange(1, 500)}"
    return str(r.randrange(2, 20))


def word(r):
    x = r.random()
    if x < 0.03:
        return r.choice(NAMES)
    if x < 0.05:
        return r.choice(CONTRACTIONS)
    if x < 0.06:
        return number(r)
    if x < 0.065:
        return r.choice(ACCENTED)
    return r.choice(WORDS)


def sentence(r):
    n = r.randrange(4, 22)
    ws = [word(r) for _ in range(n)]
    for i in range(2, n - 1):
        if r.random() < 0.08:
            ws[i] += r.choice([",", ",", ",", ";", " —", ":"])
    s = " ".join(ws)
    s = s[0].upper() + s[1:]
    end = r.choices([".", "?", "!", "..."], [80, 10, 6, 4])[0]
    s += end
    q = r.random()
    if q < 0.08:
        s = f"\"{s}\" {r.choice(['she said', 'he asked', 'Tom replied', 'they shouted'])}."
    elif q < 0.10:
        s = f"“{s}”"
    elif q < 0.12:
        s = f"({s})"
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=4.0, help="size in MB (1e6 bytes), default 4")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)
    target = int(a.mb * 1e6)
    parts, size = [], 0
    while size < target:
        para = " ".join(sentence(r) for _ in range(r.randrange(2, 9))) + "\n\n"
        if r.random() < 0.05:
            para = "    " + para  # an indented paragraph: runs of spaces
        parts.append(para)
        size += len(para.encode("utf-8"))
    data = "".join(parts).encode("utf-8")[:target]
    # Do not end inside a UTF-8 sequence.
    while data and (data[-1] & 0xC0) == 0x80:
        data = data[:-1]
    if data and data[-1] >= 0xC0:
        data = data[:-1]
    with open(a.out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
