from kbl.cli import main

raise SystemExit(main())
