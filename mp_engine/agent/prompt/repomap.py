"""The repository map of an agent's prompt (issue #17): every file's path and the
signatures of what it defines (classes, functions, methods, types), never their bodies.

Signatures come from tree-sitter parse trees (the grammars that `tree-sitter-language-pack`
bundles), not from regexes: the text of a definition up to its body, whitespace collapsed.
The map is cached per file by size and modification time, in memory and in a JSON file of
the run (it survives a restart): an iteration re-parses only the files that changed.
The files are those git knows in the worktree (tracked, and untracked but not ignored),
without what is not the agent's work (`workspace.NOT_WORK`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from mp_engine.core.atomic import atomic_write
from mp_engine.core.gitcmd import git
from mp_engine.core.workspace import WORK_PATHSPEC

if TYPE_CHECKING:
    from tree_sitter import Node, Parser
    from tree_sitter_language_pack import SupportedLanguage

LANGS: dict[str, SupportedLanguage] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".rb": "ruby",
    ".php": "php",
    ".sh": "bash",
    ".bash": "bash",
}
# Definitions shown in the map, and those whose members are shown under them.
DEFS = {
    "function_definition",
    "class_definition",
    "function_declaration",
    "class_declaration",
    "abstract_class_declaration",
    "method_definition",
    "method_declaration",
    "interface_declaration",
    "type_alias_declaration",
    "enum_declaration",
    "generator_function_declaration",
    "type_declaration",
    "function_item",
    "struct_item",
    "enum_item",
    "trait_item",
    "impl_item",
    "mod_item",
    "constructor_declaration",
    "record_declaration",
    "class_specifier",
    "struct_specifier",
    "namespace_definition",
    "method",
    "singleton_method",
    "class",
    "module",
    "object_declaration",
    "function_signature_item",
    "method_signature",
    "abstract_method_signature",
}
CONTAINERS = {
    "class_definition",
    "class_declaration",
    "abstract_class_declaration",
    "interface_declaration",
    "impl_item",
    "trait_item",
    "mod_item",
    "class_specifier",
    "namespace_definition",
    "class",
    "module",
    "record_declaration",
    "enum_declaration",
    "object_declaration",
}
MAX_PARSE_BYTES = 512 * 1024  # larger files are listed by path only
MAX_DEPTH = 3
SIG_CHARS = 160


class FileSigs(TypedDict):
    """One file's signatures, and the size and mtime (ns) they were parsed at."""

    size: int
    mtime: int
    sigs: list[str]


@dataclass
class RepoMap:
    """One worktree's map, kept between iterations (`refresh` re-reads changed files)."""

    root: Path
    cache_file: Path | None = None
    files: dict[str, FileSigs] = field(default_factory=dict)  # by path
    parsed: int = 0  # files parsed since the last `paths` (the others came from the cache)
    _dirty: bool = False

    def __post_init__(self) -> None:
        if self.cache_file is not None and self.cache_file.exists():
            try:
                self.files = json.loads(self.cache_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                self.files = {}

    def paths(self) -> list[str]:
        """Every file of the worktree git knows, sorted; starts a new round of `sigs`."""
        self.parsed = 0
        self._dirty = False
        return _listed(self.root)

    def sigs(self, rel: str) -> list[str]:
        """The signatures of one file: from the cache while its size and mtime are the
        same, else parsed (and cached). A file that vanished has none."""
        try:
            st = os.stat(self.root / rel)
        except OSError:
            return []
        known = self.files.get(rel)
        if known and known["size"] == st.st_size and known["mtime"] == st.st_mtime_ns:
            return known["sigs"]
        sigs = _signatures(self.root / rel, st.st_size)
        self.files[rel] = {"size": st.st_size, "mtime": st.st_mtime_ns, "sigs": sigs}
        self.parsed += 1
        self._dirty = True
        return sigs

    def save(self, keep: list[str] | None = None) -> None:
        """Write the cache when a file was parsed since `paths` (only the `keep` paths,
        when given: files that left the worktree drop out)."""
        if keep is not None:
            kept = set(keep)
            gone = [p for p in self.files if p not in kept]
            for p in gone:
                del self.files[p]
            self._dirty = self._dirty or bool(gone)
        if self._dirty and self.cache_file is not None:
            atomic_write(self.cache_file, json.dumps(self.files, separators=(",", ":")), durable=False)
        self._dirty = False

    def refresh(self) -> list[tuple[str, list[str]]]:
        """[(path, signatures)] for every file of the worktree, sorted by path: the whole
        map (context compilation asks `sigs` only for the files whose signatures fit)."""
        paths = self.paths()
        out = [(p, self.sigs(p)) for p in paths]
        self.save(keep=paths)
        return out


def _listed(root: Path) -> list[str]:
    out = git(
        root,
        "ls-files",
        "-z",
        "--cached",
        "--others",
        "--exclude-standard",
        "--",
        *WORK_PATHSPEC,
        env={"GIT_LITERAL_PATHSPECS": "0"},
        check=False,
    ).out
    return sorted({p for p in out.split("\0") if p})


_parsers: dict[str, Parser | None] = {}


def _parser(lang: SupportedLanguage) -> Parser | None:
    if lang not in _parsers:
        try:
            from tree_sitter_language_pack import get_parser

            _parsers[lang] = get_parser(lang)
        except Exception:  # a grammar the installed pack lacks: paths only
            _parsers[lang] = None
    return _parsers[lang]


def _signatures(path: Path, size: int) -> list[str]:
    lang = LANGS.get(path.suffix.lower())
    if lang is None or size > MAX_PARSE_BYTES:
        return []
    parser = _parser(lang)
    if parser is None:
        return []
    try:
        source = path.read_bytes()
    except OSError:
        return []
    out: list[str] = []
    _walk(parser.parse(source).root_node, source, 0, out)
    return out


def _walk(node: Node, source: bytes, depth: int, out: list[str]) -> None:
    for child in node.named_children:
        if child.type in DEFS:
            out.append("  " * depth + _signature(child, source))
            if child.type in CONTAINERS and depth + 1 < MAX_DEPTH:
                _walk(child, source, depth + 1, out)
        elif child.type not in ("block", "statement_block", "compound_statement") or depth > 0:
            # wrappers (decorators, exports, class bodies, declaration lists): look inside;
            # a function's body is never entered, so local helpers stay out of the map
            _walk(child, source, depth, out)


def _signature(node: Node, source: bytes) -> str:
    body = node.child_by_field_name("body")
    end = body.start_byte if body is not None and body.start_byte > node.start_byte else node.end_byte
    text = " ".join(source[node.start_byte : end].decode("utf-8", "replace").split())
    text = text.rstrip("{:= ").rstrip()
    return text if len(text) <= SIG_CHARS else text[: SIG_CHARS - 3] + "..."
