"""``python -m eval.realcode build|questions|run``: see eval/realcode/README.md."""

from eval.realcode.cli import main

raise SystemExit(main())
