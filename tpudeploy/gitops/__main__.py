"""`python3 -m tpudeploy.gitops ...`, as the workflows call it (standard library only)."""

from tpudeploy.gitops.helpers import main

raise SystemExit(main())
