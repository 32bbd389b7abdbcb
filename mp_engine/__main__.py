from mp_engine.entry import main

raise SystemExit(main())
