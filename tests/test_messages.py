"""``messages.clipped``: an error's text cut for a one-line message, never inside a quote or a path."""

import pytest

from gensbi_sharding.messages import clipped, shown

SPEC = "[tensorstore_spec='{\\\"driver\\\":\\\"zarr\\\",\\\"path\\\":\\\"rng/\\\"}']"
TENSORSTORE = ('NOT_FOUND: Error opening "zarr" driver: Metadata at "rng/.zarray" in OCDBT database at local file '
               f'"/tmp/b61/e/checkpoints/20/arrays/" does not exist {SPEC}')


@pytest.mark.parametrize("text, limit, expected", [
    ("short", 120, "short"),
    ("first line\\nsecond line", 120, "first line\\nsecond line"),  # a literal backslash-n: one line
    ("\n  first line  \nsecond line", 120, "first line"),
    (TENSORSTORE, 120, 'NOT_FOUND: Error opening "zarr" driver: Metadata at "rng/.zarray" in OCDBT database at local '
                       "file ..."),
    (TENSORSTORE, 160, TENSORSTORE[:TENSORSTORE.index(" [tensorstore")] + " ..."),
    (TENSORSTORE, 1000, TENSORSTORE),
    ("it's a 'quoted name, with spaces' after", 12, "it's a ..."),  # "it's": an apostrophe, not a quote
    ("'a quoted name, with spaces, longer than the limit' then more", 20,
     "'a quoted name, with spaces, longer than the limit' ..."),  # no boundary within: the first after it
    ("x" * 50, 20, "x" * 50),  # one token: whole
    ("'" + "a" * 100 + "'", 10, "'aaaa ... aaaa'"),  # one token over 4 * limit: its two ends
])
def test_clipped_cuts_only_at_a_word_boundary_outside_quotes(text, limit, expected):
    assert clipped(text, limit) == expected


def test_clipped_of_an_exception_reads_its_text():
    assert clipped(KeyError("meta")) == "'meta'"


@pytest.mark.parametrize("value, expected", [
    # Was cut inside the quotes: repr's escaped \' read as the string's end, and bytes' b' read as an apostrophe
    ("he said \"no\" and then 'it' went on and on and on and on and on and on",
     "'he said \"no\" and then \\'it\\' went on and on and on and on and on and on'"),
    (b"a bytes value with many words inside it that go on and on and on and on",
     "b'a bytes value with many words inside it that go on and on and on and on'"),
    ([b"first bytes, with words in it", rb"second \ raw", "third, long enough to cut after"],
     "[b'first bytes, with words in it', b'second \\\\ raw' ..."),
    (["ends in a backslash \\", "a second item, long enough to be cut"],
     "['ends in a backslash \\\\' ..."),  # \\' ends the string: the backslash is escaped, not the quote
    ({"Bob's key": "herb's value, long enough for a cut after it"}, "{\"Bob's key\" ..."),  # apostrophes in words
])
def test_shown_cuts_a_repr_only_outside_its_quotes(value, expected):
    assert shown(value) == expected
