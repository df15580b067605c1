"""The instruction as token ids: words hashed into a fixed vocabulary, so that no tokenizer or
vocabulary has to be downloaded or kept in step with the dataset (numpy and the standard library
only: the server uses it too).

A word is a maximal run of letters and digits, lower-cased; its id is ``1 + crc32(word) mod
(vocab_size - 1)`` (0 is padding). Two words may share an id (a hash collision). With the
default vocabulary of 4096 ids (``BCConfig.vocab_size``), LIBERO's 40 instructions (69 distinct
words) collide nowhere; with their 120 curated paraphrases (S22/D20; 108 words) one pair does
(``black``, ``door``). The longest of them has 22 words, within the default 32 tokens.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


def words(instruction: str) -> list[str]:
    """The lower-cased words of ``instruction`` (runs of ``[a-z0-9]``; punctuation dropped)."""
    return _WORD.findall(instruction.lower())


def token_ids(instruction: str, vocab_size: int, max_tokens: int) -> np.ndarray:
    """(max_tokens,) int32: the hashed ids of the first ``max_tokens`` words of ``instruction``,
    right-padded with 0. ``ValueError`` when ``vocab_size < 2`` or ``max_tokens < 1``."""
    if vocab_size < 2 or max_tokens < 1:
        raise ValueError(f"vocab_size must be >= 2 and max_tokens >= 1, got {vocab_size} and {max_tokens}")
    out = np.zeros(max_tokens, dtype=np.int32)
    for i, w in enumerate(words(instruction)[:max_tokens]):
        out[i] = 1 + zlib.crc32(w.encode()) % (vocab_size - 1)
    return out
