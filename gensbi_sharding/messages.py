"""An error's text shortened for a one-line message: its first line, cut only at a word boundary outside quotes (a
path or a quoted name is never halved), marked " ...". Pure Python: the library's refusals and the harness's."""

__all__ = ["clipped", "shown"]


def clipped(text: object, limit: int = 240) -> str:
    """The first non-blank line of ``str(text)``: whole when at most ``limit`` characters or when it has no word
    boundary outside quotes; else cut at the last such boundary within ``limit`` (the first after it, if none is
    within), ended with " ...". Only one token over ``4 * limit`` (a huge value's repr) is cut inside: its two ends.
    Was ``str(err)[:120]``: ``at local file "/tmp/b61/e_arrays_man)``, half a path and an unclosed quote."""
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), "")
    if len(line) <= limit:
        return line
    quote, cut = None, 0
    for i, char in enumerate(line):
        follows = line[i + 1] if i + 1 < len(line) else " "
        if quote:  # a ' closes only before a non-word character: "it's" inside 'a name' does not close it
            # after an even number of backslashes: repr's 'a \'b\' c' closes only at the end
            closes = char == quote and (i - len(line[:i].rstrip("\\"))) % 2 == 0
            quote = None if closes and (quote == '"' or not (follows.isalnum() or follows == "_")) else quote
        elif char in "\"'" and _opens(line, i):
            quote = char
        elif char.isspace() and i > 0 and not line[i - 1].isspace():
            cut = i if i <= limit or not cut else cut
            if i >= limit:
                break
    kept = line[:cut].rstrip(" ,;:") if cut else line
    if len(kept) > 4 * limit:  # one huge token: not all of it
        kept = f"{kept[:limit // 2]} ... {kept[-(limit // 2):]}"
    return f"{kept} ..." if cut else kept


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` on one line, ``clipped``: cut between words outside quotes (" ..."), never in a quote."""
    return clipped(" ".join(line.strip() for line in repr(value).splitlines()), limit)


def _opens(line: str, i: int) -> bool:
    """Whether the quote at ``line[i]`` opens a value: not an apostrophe in a word ("can't"), but one after ``b``."""
    start = i
    while start > 0 and i - start < 2 and line[start - 1] in "bBrRuUfF":
        start -= 1
    return any(at == 0 or not (line[at - 1].isalnum() or line[at - 1] == "_") for at in range(start, i + 1))
