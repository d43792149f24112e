"""`python -m benchmarks.peers ...`: see benchmarks/peers/run.py."""

from benchmarks.peers.run import main

raise SystemExit(main())
