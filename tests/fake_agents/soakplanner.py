#!/usr/bin/env python3
"""The soak's fake planner (issue #45): it answers with the plan the goal carries in its
```json block, as a <plan> block with the run's nonce, so each planned MP brings its own."""

import re

import fakelib

opts = fakelib.options()
text = fakelib.prompt(opts)
fakelib.start(opts, text)
goal = text.split("## Goal", 1)[-1]
m = re.search(r"^```json\n(.*?)^```", goal, re.M | re.S)
print("Here is the plan.")
print(f'<plan nonce="{fakelib.nonce(text)}">\n{m.group(1) if m else "no plan in the goal"}\n</plan>')
