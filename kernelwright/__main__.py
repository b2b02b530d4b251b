"""`python -m kernelwright ...` is the `kernelwright` command."""

from kernelwright.cli.main import main

raise SystemExit(main())
