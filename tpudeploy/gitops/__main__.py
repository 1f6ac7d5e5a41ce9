"""`python3 -m tpudeploy.gitops ...`, as the workflows call it (standard library only)."""

from tpudeploy.gitops.cli import main

raise SystemExit(main())
