from pinset.cli import main

raise SystemExit(main())
