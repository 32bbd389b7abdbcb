from mp_engine.cli.entry import main

raise SystemExit(main())
