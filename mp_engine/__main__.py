from mp_engine.cli import main

raise SystemExit(main())
