"""The repository map: signatures from tree-sitter parse trees (no bodies), the engine's
files left out, and a cache that re-parses only what changed."""

from __future__ import annotations

import os

from mp_engine.agent.prompt.repomap import RepoMap
from tests.gitutil import git

PY = '''import os

@dataclass
class Store(Base):
    """doc"""
    def get(self, key: str) -> bytes:
        def helper():
            pass
        return b""

    async def put(self, key, value=None): ...

def main(argv: list[str] | None = None) -> int:
    return 0
'''
TS = """export interface User { name: string }
export class Api extends Base {
  constructor(private url: string) { super() }
  async fetch(path: string): Promise<User> { return null as any }
}
export function make(url: string): Api { return new Api(url) }
"""
RS = """pub struct P { x: i32 }
impl P { pub fn new(x: i32) -> Self { P { x } } }
pub trait T { fn t(&self); }
"""


def repo(tmp_path):
    root = tmp_path / "r"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(PY)
    (root / "web").mkdir()
    (root / "web" / "a.ts").write_text(TS)
    (root / "src" / "lib.rs").write_text(RS)
    (root / "README.md").write_text("# readme\n")
    (root / "SESSION_STATE.json").write_text("{}")  # the engine's: never in the map
    (root / "SYSTEM").mkdir()
    (root / "SYSTEM" / "RESULT_last.md").write_text("x")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "gen.py").write_text("def generated(): pass\n")  # ignored: not in the map
    git(root, "init", "-q")
    git(root, "add", "src/app.py")  # tracked and untracked files both count
    return root


def test_signatures_not_bodies_for_each_language(tmp_path):
    entries = dict(RepoMap(repo(tmp_path)).refresh())
    assert entries["src/app.py"] == [
        "class Store(Base)",
        "  def get(self, key: str) -> bytes",
        "  async def put(self, key, value=None)",
        "def main(argv: list[str] | None = None) -> int",
    ]
    assert entries["web/a.ts"] == [
        "interface User",
        "class Api extends Base",
        "  constructor(private url: string)",
        "  async fetch(path: string): Promise<User>",
        "function make(url: string): Api",
    ]
    assert entries["src/lib.rs"] == [
        "pub struct P",
        "impl P",
        "  pub fn new(x: i32) -> Self",
        "pub trait T",
        "  fn t(&self);",
    ]
    assert entries["README.md"] == [] and ".gitignore" in entries
    assert not any(p.startswith(("SYSTEM", "SESSION_STATE", "build/")) for p in entries)


def test_the_cache_reparses_only_changed_files_and_survives_a_restart(tmp_path):
    root = repo(tmp_path)
    cache = tmp_path / "repomap.json"
    m = RepoMap(root, cache)
    m.refresh()
    assert m.parsed == 5  # app.py, a.ts, lib.rs, README.md, .gitignore
    m.refresh()
    assert m.parsed == 0
    app = root / "src" / "app.py"
    app.write_text(PY + "\ndef added(x): pass\n")
    os.utime(app, ns=(app.stat().st_mtime_ns + 10**9,) * 2)
    entries = dict(m.refresh())
    assert m.parsed == 1 and entries["src/app.py"][-1] == "def added(x)"
    again = RepoMap(root, cache)  # a restarted engine reads the cache
    again.refresh()
    assert again.parsed == 0
    (root / "web" / "a.ts").unlink()
    assert "web/a.ts" not in dict(again.refresh())
