from evogan.cli import main

raise SystemExit(main())
