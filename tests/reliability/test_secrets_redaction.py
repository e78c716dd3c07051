"""Secret redaction in linear time, with the outputs it gave before on the cases it handled.

:func:`tomrl.io.redact_secrets` runs on every JSON write and error message. Its URL pattern used to
start with the scheme (``[A-Za-z][A-Za-z0-9+.-]*://``), which re-scanned an alphanumeric run from
each of its letters: 11.6 s for a 100 kB line, and a 10 MB line never finished. Each case below is
a 10 MB line timed against a limit far above what linear code takes on a slow machine.
"""

from __future__ import annotations

import random
import re
import time

import pytest

from tomrl.io import looks_like_a_key, redact_secrets

SK = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
HF = "hf_" + "a1B2" * 9

SAME_AS_BEFORE = [  # (text, redacted), as the former patterns redacted them
    ("http://u:KEY@host", "http://***@host"),
    ("https://user:p4ss@example.com/v1", "https://***@example.com/v1"),
    ("ftp://a@b/c", "ftp://***@b/c"),
    ("see https://x:y@h/p and http://q:r@s/t", "see https://***@h/p and http://***@s/t"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("mail me: a@b.org", "mail me: a@b.org"),
    ("http://host/path@not-userinfo", "http://host/path@not-userinfo"),
    (f"key {SK} here", "key *** here"),
    (f"{HF}", "***"),
    ("gsk_" + "A" * 40, "***"),
    ("xai-" + "9" * 40, "***"),
    ("sk-short", "sk-short"),
    ("task-" + "a" * 30, "task-" + "a" * 30),  # "sk-" inside a word is not a key
    ("plain text with no secrets", "plain text with no secrets"),
    ("", ""),
]

NEW_CASES = [
    ("http://u:p@ss@host/v1", "http://***@host/v1"),  # an unescaped '@' in a password: all of it hidden
    ("http://h/v1?api-key=S3cret&x=1", "http://h/v1?api-key=***&x=1"),
    ("http://h/v1?x=1&API_KEY=S3cret", "http://h/v1?x=1&API_KEY=***"),
    ("http://h/v1?apikey=S&key=T&token=U&access_token=V&auth=W", "http://h/v1?apikey=***&key=***&token=***&access_token=***&auth=***"),
    ("https://h/x?subscription-key=S#frag", "https://h/x?subscription-key=***#frag"),
    ("https://h/blob?sv=2020&sig=AbC%2Fd", "https://h/blob?sv=2020&sig=***"),
    ("https://h/cb#access_token=S&state=1", "https://h/cb#access_token=***&state=1"),
    ("got 'http://h/v1?key=S'", "got 'http://h/v1?key=***'"),
    ("http://h/v1?model=m&monkey=", "http://h/v1?model=m&monkey="),  # an empty value stays empty
    ("http://h/v1?keys=1&model=key", "http://h/v1?keys=1&model=key"),  # a name must end in the word; values are not names
    ("where is the key? in the box", "where is the key? in the box"),  # prose is left alone
    ("a&b=1 key=value token= x", "a&b=1 key=value token= x"),  # no '?', '&', '#' or ';' right before the name
]


@pytest.mark.parametrize("text, redacted", SAME_AS_BEFORE + NEW_CASES)
def test_redaction_outputs(text, redacted):
    assert redact_secrets(text) == redacted
    assert redact_secrets(redacted) == redacted  # already redacted text is left as it is


def test_nested_values_and_key_shapes():
    value = {"a": [f"http://u:{SK}@h", ("x", HF)], "n": 3, "b": None}
    assert redact_secrets(value) == {"a": ["http://***@h", ("x", "***")], "n": 3, "b": None}
    assert looks_like_a_key(SK) and looks_like_a_key(HF) and not looks_like_a_key("OPENAI_API_KEY")


FORMER_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")  # quadratic: short texts only


def test_nothing_the_former_pattern_hid_is_left_visible():
    """On random short texts built from URL pieces, whatever the former pattern took for userinfo
    in the new output is only ever the redaction mark."""
    pieces = ["http", "://", "u", ":", "p", "@", "/", "h", " ", "?", "key=", "&", "#", "s", "k", "-", "x"]
    rng = random.Random(27)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        redacted = redact_secrets(text)
        for match in FORMER_URL_CREDENTIALS.finditer(redacted):
            userinfo = match.group(0)[len(match.group("scheme")) : -1]
            assert userinfo == "***", (text, redacted)


TEN_MB = 10 * 2**20
HOSTILE_LINES = {  # name -> a text of about 10 MB
    "letters and digits": "a1B2" * (TEN_MB // 4),
    "many :// and @": "http://u:p@h/" * (TEN_MB // 13),
    "many :// without a slash after": "a://b@c:" * (TEN_MB // 8),
    "one :// then @ at every other character": "x://" + "b@" * (TEN_MB // 2),
    ":// then long runs": ("a://" + "c" * 1000) * (TEN_MB // 1004) + "@",
    "many ? with names": "?aaaa" * (TEN_MB // 5),
    "one ? then a long name": "?" + "a" * TEN_MB,
    "many secret parameters": "&apikey=v" * (TEN_MB // 9),
    "many plain parameters": "&x=1" * (TEN_MB // 4),
    "key prefixes": "sk-" * (TEN_MB // 3),
    "words and spaces": "x@y ://k?key=1 " * (TEN_MB // 15),
}


@pytest.mark.parametrize("name", list(HOSTILE_LINES))
def test_redaction_is_linear_on_10_mb_lines(name):
    text = HOSTILE_LINES[name]
    seconds = []
    for _ in range(2):  # the faster of two, so that a busy machine does not fail the test
        started = time.perf_counter()
        redact_secrets(text)
        seconds.append(time.perf_counter() - started)
    assert min(seconds) < 2.0, f"{name}: {min(seconds):.2f} s for {len(text) / 2**20:.0f} MB"
