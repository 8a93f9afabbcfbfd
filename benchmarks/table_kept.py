"""Tables that ``sbibm.py table`` would write over: each kept under a new name first, and said.

A rerun of ``table`` into the same folder (its first job folder, or the same ``--out``) rewrites its four files from
the job folders, which are their record; but a table read, copied or committed from there was replaced without a word
(a job rerun, other scores). Now each file whose content changes is copied first to a name not used yet
(``sbibm_table.previous.md``, then ``sbibm_table.previous-2.md``), and the paths are printed on stderr.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from cli_args import not_a_script

__all__ = ["keep_previous"]

_TEXTS = (".csv", ".md")  # the plot differs by its pixels only where a table does: kept with them, never alone


def keep_previous(out: Path, files: dict[str, bytes | str]) -> list[Path]:
    """Copy each of ``files`` (name -> its new content) that ``out`` holds with another content to a new name beside
    it, where any table's text changes; return the copies, each said on stderr (with the folder written)."""
    encoded = {name: data.encode() if isinstance(data, str) else data for name, data in files.items()}
    changed = [name for name in files if (out / name).is_file() and (out / name).read_bytes() != encoded[name]]
    if not any(Path(name).suffix in _TEXTS for name in changed):
        return []
    kept = []
    for name in changed:
        stem, suffix, copy = Path(name).stem, Path(name).suffix, 1
        while (aside := out / f"{stem}.previous{f'-{copy}' if copy > 1 else ''}{suffix}").exists():
            copy += 1
        try:
            shutil.copy2(out / name, aside)
        except OSError as err:  # a full or read-only disk: the previous table stays as it was, nothing written
            for made in [*kept, aside]:
                made.unlink(missing_ok=True)
            raise SystemExit(f"{aside} could not be written ({err.strerror or err}) to keep the previous table in "
                             f"{out}, which is as it was: nothing written; free space there, or pass another --out")
        kept.append(aside)
    print(f"sbibm.py table: {out} held another table; its previous files are kept as "
          f"{', '.join(map(str, kept))} (the new ones are written in their place)", file=sys.stderr)
    return kept


not_a_script(__name__, __file__)
