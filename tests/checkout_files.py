"""The config files the checkout ships, told apart from those a user adds to it.

The README has a user add ``conf/rule/my_rule.yaml`` (and run folders such as ``runs/a``) inside the checkout. The
harness rightly lists every option on disk, so a test that pins a group's options builds the list from the disk and
checks the shipped part of it against its own literal: the files git tracks (all on disk outside a git checkout).
"""

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"


def shipped_files(folder: Path, pattern: str = "*.yaml") -> list[Path]:
    """The files matching ``pattern`` directly in ``folder`` that git tracks, sorted.

    Parameters
    ----------
    folder : Path
        A folder of the checkout, e.g. ``CONF / "rule"``.
    pattern : str
        A glob of file names in it.

    Returns
    -------
    list of Path
        The tracked ones; every match on disk where ``REPO`` is no git checkout (an unpacked archive), since
        then nothing tells a user's file from a shipped one.
    """
    on_disk = sorted(folder.glob(pattern))
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--", str(folder)], cwd=REPO, capture_output=True,
                                text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return on_disk
    tracked = {(REPO / name).resolve() for name in listed.split("\0") if name}
    return [path for path in on_disk if path.resolve() in tracked] if tracked else on_disk


def shipped_options(group: str) -> list[str]:
    """The options of ``conf/<group>/`` the checkout ships, sorted (e.g. ``["fsdp", "fsdp_tensor", ...]``)."""
    return [path.stem for path in shipped_files(CONF / group)]


def options_on_disk(group: str) -> list[str]:
    """Every option of ``conf/<group>/`` on disk, a user's files included, sorted as Hydra lists them."""
    return sorted(path.stem for path in (CONF / group).glob("*.yaml"))
