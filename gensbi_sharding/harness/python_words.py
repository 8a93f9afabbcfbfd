"""A folder refusal of a run started from Python (``run(cfg)``, no Hydra), in the settings such a caller sets.

The refusals of a job's folder name launch.py's overrides: ``choose another hydra.run.dir``, ``rerun with
train.resume=auto``. A Python caller takes none of them: it sets ``cfg.output_dir`` (in ``omegaconf.open_dict``:
it is no field of the composed config) and ``cfg.train.resume``, as ``sweep_hints.continue_command`` says for such a
run (was: the overrides, under ``run(cfg)`` too). Pure Python: no JAX.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["in_python_words", "python_words"]

#: An override as a refusal names it: plain, or as ``override_grammar.hydra_override`` quotes it for the shell
#: (``'hydra.run.dir="runs/a(1)"'``), or a placeholder (``hydra.run.dir=<new folder>``).
_OVERRIDE = re.compile(r"""'?(hydra\.run\.dir|train\.resume|train\.steps)="""
                       r"""(?:"([^"]*)"|(<[^>]*>(?:/<[^>]*>)*)|([^\s'",;)]+))'?""")
_SETTING = {"hydra.run.dir": "cfg.output_dir", "train.resume": "cfg.train.resume", "train.steps": "cfg.train.steps"}


def python_words(message: str) -> str:
    """``message`` with each override of the run's folder, ``train.resume`` or ``train.steps`` written as the config
    setting a Python caller sets (``hydra.run.dir=runs/a`` -> ``cfg.output_dir='runs/a'``).

    Parameters
    ----------
    message : str
        A refusal of the run's folder, as launch.py's run says it.

    Returns
    -------
    str
    """
    said = _OVERRIDE.sub(_setting, message)
    said = said.replace("hydra.run.dir (or hydra.sweep.dir)", "hydra.run.dir").replace("hydra.run.dir",
                                                                                       "cfg.output_dir")
    said = said.replace("with the same command plus", "by the same call with").replace("the same command with",
                                                                                      "the same call with")
    said = re.sub(r"(cfg\.\S+=\S+) (?=cfg\.)", r"\1 and ", said)  # train.resume=a hydra.run.dir=b: both set
    return said + ("; set cfg.output_dir in omegaconf.open_dict(cfg)" if "cfg.output_dir" in said else "")


def _setting(override: re.Match) -> str:
    value = next(v for v in override.groups()[1:] if v is not None)
    stop = value[-1] if value[-1] in ":." else ""  # the sentence's (train.resume=auto: a dry run ...), not the value's
    value = value.removesuffix(stop)
    return f"{_SETTING[override[1]]}={value if value.isdigit() else repr(value)}{stop}"


@contextmanager
def in_python_words() -> Iterator[None]:
    """A folder refusal raised inside, raised again in ``python_words`` where no Hydra app runs (``run(cfg)`` from
    Python); as it is under launch.py."""
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.folder_lock import FolderInUseError

    try:
        yield
    except (ConfigError, FileExistsError, FolderInUseError) as refused:
        if HydraConfig.initialized() or python_words(str(refused)) == str(refused):
            raise
        raise type(refused)(python_words(str(refused))) from None
