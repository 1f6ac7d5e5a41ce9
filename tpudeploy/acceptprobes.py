"""What `make accept` sends and how it judges the answers: the build log's acceptance table as
data (standard library and facts only, no network; tpudeploy/accept.py sends the requests).

Every probe is new per run (random colours, needles, depths): a server that replays canned
answers cannot pass, and neither can a proxy cache.
"""

from __future__ import annotations

import base64
import math
import re
import secrets
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from tpudeploy import facts

# ---- the build log's figures ------------------------------------------------------------------

# "long context ✅ 26,016 prompt tokens accepted" (build log, final configuration's table).
LONG_PROMPT_TOKENS = 26_016
# "3/3 needle retrievals at 2K/8K/14K" (build log, the release matrix's paragraph).
NEEDLE_DEPTHS_TOKENS = (2_048, 8_192, 14_336)
# "8/9 byte-identical outputs": nine runs of one prompt at temperature 0.
DETERMINISM_RUNS = 9
BUILD_LOG_IDENTICAL = 8
# The pass line: one divergence more than the build log's clean build. 8/9 is what a build the
# author called clean gave (one answer in nine differed, which batch-shape-dependent kernels can
# cause); 7/9 allows that once more, so scheduling noise does not fail a good build, while 6/9
# or fewer (a third of the answers differ) is a build whose greedy decoding is not repeatable.
DETERMINISM_PASS = 7

# Seconds, from the build log's single-client measurements: decode at the measured TPOT (8.02 ms
# per output token, facts.MEASURED_TPOT_S); prefill from the 8,192-token row's median TTFT at 1
# client (289.4 ms, facts.MEDIAN_TTFT_MS), so 8,192 / 0.2894 = about 28,300 prompt tokens a second.
DECODE_S_PER_TOKEN = facts.MEASURED_TPOT_S
PREFILL_TOKENS_PER_S = 8_192 / (facts.MEDIAN_TTFT_MS[(8_192, 1)] / 1000)

# The estimate for English filler before the server has counted anything: OpenAI's rule of thumb
# "1 token ~= 4 chars in English" (help.openai.com/en/articles/4936856, "What are tokens and how
# to count them"; read through a stored page quoting it, the help page itself was not in the
# corpus). Gemma's SentencePiece vocabulary is not OpenAI's: the run measures the real ratio from
# each filler row's usage.prompt_tokens and sizes the long prompt with the measured one.
CHARS_PER_TOKEN = 4.0
# usage.prompt_tokens within this share of the target counts as "near": wider than the
# measured-ratio error between two fillers of the same vocabulary, far narrower than a prompt
# the server truncated or a proxy cut.
NEAR = 0.15

# ---- the image --------------------------------------------------------------------------------

# Colours far apart in hue and lightness, each with one common English name, so a correct
# answer names them without synonyms. Two distinct ones per run: 30 ordered pairs.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 50),
    "blue": (30, 60, 220),
    "yellow": (245, 220, 30),
    "black": (0, 0, 0),
    "white": (255, 255, 255),
}
IMAGE_SIZE = (256, 128)  # width, height: two 128x128 halves
# vLLM's per-image budget for this model (facts' mm_max_tokens_per_item): the most one image
# can cost; the real count comes back in usage.prompt_tokens.
_PER_ITEM = facts.GEMMA_4_E2B_GEOMETRY["mm_max_tokens_per_item"]
IMAGE_TOKENS_AT_MOST: int = _PER_ITEM["image"] if isinstance(_PER_ITEM, Mapping) else 0
IMAGE_PROMPT = (
    "The image is split into a left half and a right half, each one solid colour. "
    "Answer in the form 'left: <colour>, right: <colour>' using one common colour name each."
)


def _chunk(kind: bytes, data: bytes) -> bytes:
    # PNG chunk: length, type, data, CRC-32 of type+data (PNG specification, ISO/IEC 15948 5.3).
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def two_colour_png(left: tuple[int, int, int], right: tuple[int, int, int]) -> bytes:
    """A truecolour 8-bit PNG: the left half one colour, the right half the other."""
    width, height = IMAGE_SIZE
    row = b"\x00" + bytes(left) * (width // 2) + bytes(right) * (width - width // 2)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(row * height, 9))
        + _chunk(b"IEND", b"")
    )


@dataclass(frozen=True)
class ImageProbe:
    left: str
    right: str

    @classmethod
    def random(cls) -> ImageProbe:
        names = list(PALETTE)
        left = secrets.choice(names)
        right = secrets.choice([n for n in names if n != left])
        return cls(left, right)

    def data_url(self) -> str:
        png = two_colour_png(PALETTE[self.left], PALETTE[self.right])
        return "data:image/png;base64," + base64.b64encode(png).decode("ascii")

    def judge(self, answer: str) -> str:
        """ "" when the answer names both colours and no other colour of the palette, else why.

        Naming every colour of the palette would otherwise pass whatever was drawn."""
        named = {c for c in PALETTE if re.search(rf"\b{c}\b", answer.lower())}
        missing = [c for c in (self.left, self.right) if c not in named]
        extra = sorted(named - {self.left, self.right})
        if missing:
            return f"the answer does not name {' and '.join(missing)} (the image was {self})"
        if extra:
            return f"the answer also names {', '.join(extra)}, not in the image ({self})"
        return ""

    def __str__(self) -> str:
        return f"left {self.left}, right {self.right}"


# ---- filler and needles -----------------------------------------------------------------------

# Words without digits or colour names: nothing in the filler a needle or a colour could be
# confused with.
_WORDS = (
    "the",
    "river",
    "keeps",
    "its",
    "course",
    "through",
    "quiet",
    "valleys",
    "while",
    "farmers",
    "count",
    "seasons",
    "by",
    "rain",
    "and",
    "markets",
    "open",
    "early",
    "when",
    "bridge",
    "is",
    "clear",
    "travellers",
    "speak",
    "of",
    "distant",
    "towns",
    "where",
    "bells",
    "ring",
    "at",
    "noon",
    "bakers",
    "sell",
    "warm",
    "bread",
    "to",
    "children",
    "walking",
    "slowly",
    "toward",
    "school",
    "under",
    "old",
    "trees",
    "that",
    "shade",
    "narrow",
    "road",
    "beside",
    "a",
    "stone",
    "wall",
    "covered",
    "with",
    "soft",
    "moss",
)


def filler(chars: int, rng: secrets.SystemRandom | None = None) -> str:
    """About `chars` characters of plain sentences made of common words, no digits."""
    rng = rng or secrets.SystemRandom()
    sentences: list[str] = []
    size = 0
    while size < chars:
        words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 16))]
        sentence = " ".join(words).capitalize() + "."
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)[:chars]


def chars_for(tokens: int, chars_per_token: float) -> int:
    return int(tokens * chars_per_token)


def estimate_tokens(text_chars: int, chars_per_token: float) -> int:
    return math.ceil(text_chars / chars_per_token)


def expected_seconds(prompt_tokens: int, max_tokens: int) -> float:
    """The build log's single-stream rates: prefill, then every output token decoded."""
    return prompt_tokens / PREFILL_TOKENS_PER_S + max_tokens * DECODE_S_PER_TOKEN


@dataclass(frozen=True)
class Needle:
    code: str  # six random digits
    depth: float  # where in the filler it sits, 0..1

    @classmethod
    def random(cls) -> Needle:
        rng = secrets.SystemRandom()
        return cls(f"{rng.randrange(10**6):06d}", round(rng.uniform(0.05, 0.95), 2))

    def prompt(self, filler_text: str) -> str:
        """The filler with the needle sentence at `depth` (on a sentence boundary), then the
        question."""
        cut = filler_text.find(". ", int(len(filler_text) * self.depth))
        cut = len(filler_text) if cut < 0 else cut + 2
        sentence = f"The secret code for the archive is {self.code}. "
        return (
            filler_text[:cut]
            + sentence
            + filler_text[cut:]
            + "\n\nWhat is the secret code for the archive? Answer with the six digits only."
        )

    def judge(self, answer: str) -> str:
        if self.code in answer:
            return ""
        return f"the answer does not contain the needle {self.code} (at depth {self.depth:.0%})"


def modal_share(answers: list[str]) -> int:
    """How many answers equal (byte for byte) the most common one."""
    counts: dict[str, int] = {}
    for answer in answers:
        counts[answer] = counts.get(answer, 0) + 1
    return max(counts.values(), default=0)


def measured_ratio(text_chars: int, prompt_tokens: int) -> float:
    """Characters per token the server counted (the chat template's few tokens included)."""
    return text_chars / prompt_tokens if prompt_tokens > 0 else CHARS_PER_TOKEN
