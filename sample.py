"""Sample a trained run's posterior at your own observation: ``python sample.py <run folder> <x_o.npy>``.

``--help`` lists the options; the work is ``gensbi_sharding.harness.own_observation``'s.
"""

import sys

try:
    from gensbi_sharding.harness.own_observation import main
except ModuleNotFoundError as missing:  # e.g. the system Python instead of the project's .venv, as launch.py says
    if (missing.name or "").startswith("gensbi_sharding") or __name__ != "__main__":
        raise
    sys.exit(f"sample.py: {missing.name!r} is not installed for {sys.executable}. From the repository, run "
             ".venv/bin/python sample.py ... (make run creates .venv), or activate .venv.")

if __name__ == "__main__":
    from gensbi_sharding.harness.log_file import console_fits, drop_late_callbacks

    console_fits()  # a console without UTF-8 prints a non-ASCII run folder's name escaped, never an UnicodeEncodeError
    drop_late_callbacks()  # a damaged checkpoint's reads still under way: no tracebacks around its refusal
    sys.exit(main())
