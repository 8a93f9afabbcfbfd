"""Sample a trained run's posterior at your own observation: ``python sample.py <run folder> <x_o.npy>``.

``--help`` lists the options; the work is ``gensbi_sharding.harness.own_observation``'s.
"""

import sys

from gensbi_sharding.harness.own_observation import main

if __name__ == "__main__":
    sys.exit(main())
