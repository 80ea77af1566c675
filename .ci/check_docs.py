#!/usr/bin/env python3
"""Checks the repository's Markdown (Python 3.11, standard library only).

Every Markdown file git knows (tracked, or untracked and not ignored, such as a freshly
generated chapter) is read, and these are reported, with file and line:

1. Relative links, `[text](target)`, `![alt](target)`, `[ref]: target`, `href="..."`,
   `src="..."`, that point at a file or directory that does not exist, or at an `#anchor`
   that is not a heading of the target (GitHub's and mdBook's heading slugs: lower case,
   punctuation dropped, spaces to `-`, `-1`, `-2` for repeats; `<a id>`/`<a name>` count too).
2. Repository paths written in backticks (inline code, and the words of sh/bash code
   blocks) that do not exist. A word is taken for a path when it
   - contains `/` and starts with a top-level file or directory of the repository
     (`node/src/config/`, `deploy/local-cluster.sh`, `.ci/run`), or with a directory next to
     the Markdown file (`systemd/leaf.toml` in `deploy/README.md`), or
   - has no `/` and ends in .rs, .sh, .py, .proto, .md or .toml (`lib.rs`, `BENCHMARKS.md`):
     some file of the repository must have that name.
   URLs, routes (a leading `/`: `/api/segment/get/{tag}`), placeholders (`{`, `<`, `$`, `…`)
   and words outside those shapes are not paths. A glob (`deploy/docker-compose*.yml`) must
   match something. A path git ignores (`deploy/.env`, `docs/book/`) is something a run
   creates, and is accepted.
3. The book (`docs/src/`): `{{#include}}` targets and their `ANCHOR`s exist; links stay
   inside `docs/src/` (mdBook copies nothing else); and links in an included file resolve
   from the including chapter too, since mdBook does not rewrite them.

Exit status 0 when nothing is wrong, 1 with the list otherwise.
"""

import fnmatch
import glob
import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import PurePosixPath

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOK_SRC = "docs/src"
BARE_EXTENSIONS = (".rs", ".sh", ".py", ".proto", ".md", ".toml")
SHELL_LANGUAGES = {"sh", "bash", "shell", "console"}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def known_files() -> set[str]:
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    return {p for p in listed if p and os.path.isfile(os.path.join(ROOT, p))}


FILES = known_files()
DIRS = {str(parent) for p in FILES for parent in PurePosixPath(p).parents if str(parent) != "."}
TOP = {p.split("/")[0] for p in FILES}
BASENAMES = {p.rsplit("/", 1)[-1] for p in FILES}

problems: list[str] = []


def report(where: str, line: int, message: str) -> None:
    problems.append(f"{where}:{line}: {message}")


def read(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def norm(path: str) -> str:
    """A repository-relative path with `.` and `..` resolved; `..` above the root stays."""
    return os.path.normpath(path).replace(os.sep, "/")


# ---------------------------------------------------------------- mdBook includes

INCLUDE = re.compile(r"(?<!\\)\{\{\s*#include\s+([^\s}]+)\s*\}\}")
ANCHOR_LINE = re.compile(r"ANCHOR(?:_END)?:\s*[\w-]+")


def include_parts(arg: str) -> tuple[str, str | None]:
    """`file`, `file:anchor`, `file:10:20`, `file::20` -> (file, selector)."""
    path, _, selector = arg.partition(":")
    return path, selector or None


def select(text: str, selector: str | None) -> str | None:
    """The part of an included file mdBook takes, or None when an anchor is missing."""
    lines = text.split("\n")
    if selector is None:
        body = lines
    elif re.fullmatch(r"\d*(:\d*)?", selector):
        start, _, end = selector.partition(":")
        first = int(start) - 1 if start else 0
        last = int(end) if end else (len(lines) if ":" in selector else first + 1)
        body = lines[first:last]
    else:
        begin = re.compile(r"ANCHOR:\s*" + re.escape(selector) + r"\b")
        end = re.compile(r"ANCHOR_END:\s*" + re.escape(selector) + r"\b")
        body, inside, found = [], False, False
        for line in lines:
            if begin.search(line):
                inside = found = True
            elif end.search(line):
                inside = False
            elif inside:
                body.append(line)
        if not found:
            return None
    return "\n".join(line for line in body if not ANCHOR_LINE.search(line))


def expand(path: str, depth: int = 0) -> str:
    """A book file's text with its `{{#include}}`s replaced by what they include."""
    text = read(path)
    if depth > 5 or not path.startswith(BOOK_SRC + "/"):
        return text

    def sub(m: re.Match) -> str:
        target, selector = include_parts(m.group(1))
        resolved = norm(os.path.join(os.path.dirname(path), target))
        if not os.path.isfile(os.path.join(ROOT, resolved)):
            return ""
        part = select(read(resolved), selector)
        return part if part is not None else ""

    return INCLUDE.sub(sub, text)


# ---------------------------------------------------------------- Markdown scanning

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:[^\n]|\n(?!\s*\n))+?)(?<!`)\1(?!`)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
HTML_ATTR = re.compile(r"\b(?:href|src)\s*=\s*\"([^\"]+)\"")
HTML_ID = re.compile(r"<a\s[^>]*\b(?:id|name)\s*=\s*\"([^\"]+)\"")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*(?:\s#+\s*)?$")
COMMENT = re.compile(r"<!--.*?-->", re.S)


def split_code(text: str) -> tuple[str, list[tuple[int, str, str]]]:
    """Prose (fenced blocks blanked, line numbers kept) and the fenced blocks
    as (first line number, language, body)."""
    prose, blocks = [], []
    fence, lang, start, body = None, "", 0, []
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence, lang, start, body = m.group(1), m.group(2).lower(), number + 1, []
            prose.append("")
        elif fence is not None and line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            blocks.append((start, lang, "\n".join(body)))
            fence = None
            prose.append("")
        elif fence is not None:
            body.append(line)
            prose.append("")
        else:
            prose.append(line)
    return "\n".join(prose), blocks


def blank(text: str, pattern: re.Pattern) -> str:
    """`text` with every match of `pattern` replaced by spaces (newlines kept)."""
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def slug(heading: str) -> str:
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    # HTML tags count only outside code spans: `leaf_<id>` is text.
    pieces = re.split(r"(`+[^`]*`+)", text)
    text = "".join(p.strip("`") if p.startswith("`") else re.sub(r"<[^>]+>", "", p) for p in pieces)
    text = text.replace("*", "").replace("~", "")
    text = "".join(c for c in text.strip().lower() if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: str) -> set[str]:
    text = expand(path)
    prose, _ = split_code(blank(text, COMMENT))
    found, seen = set(), {}
    lines = prose.split("\n")
    headings = []
    for i, line in enumerate(lines):
        m = HEADING.match(line)
        if m:
            headings.append(m.group(2))
        elif i > 0 and re.fullmatch(r" {0,3}(=+|-+)\s*", line) and lines[i - 1].strip() \
                and not re.match(r"\s*([-*+|>]|\d+\.)", lines[i - 1]):
            headings.append(lines[i - 1].strip())
    for heading in headings:
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found.update(HTML_ID.findall(text))
    return found


# ---------------------------------------------------------------- links

def is_external(target: str) -> bool:
    return bool(re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target)) or target.startswith("//")


def links(text: str) -> list[tuple[int, str]]:
    prose, _ = split_code(blank(text, COMMENT))
    prose = blank(prose, CODE_SPAN)
    found = [(line_of(prose, m.start()), m.group(1)) for m in LINK.finditer(prose)]
    found += [(line_of(prose, m.start()), m.group(1)) for m in REFERENCE.finditer(prose)]
    found += [(line_of(prose, m.start()), m.group(1)) for m in HTML_ATTR.finditer(prose)]
    return [(n, t[1:-1] if t.startswith("<") else t) for n, t in found]


def resolve_link(context: str, target: str) -> tuple[str, str]:
    """(repository path of the target, anchor) for a link written in `context`."""
    raw, _, anchor = target.partition("#")
    raw = urllib.parse.unquote(raw)
    if not raw:
        return context, anchor
    base = "" if raw.startswith("/") else os.path.dirname(context)
    return norm(os.path.join(base, raw.lstrip("/"))), anchor


def check_link(where: str, number: int, context: str, target: str, note: str = "") -> None:
    if not target or is_external(target):
        return
    path, anchor = resolve_link(context, target)
    if path.startswith("../") or path == "..":
        report(where, number, f"link '{target}' leaves the repository{note}")
        return
    if context.startswith(BOOK_SRC + "/") and not (path + "/").startswith(BOOK_SRC + "/"):
        report(where, number, f"link '{target}' points outside {BOOK_SRC}/, which is all the book "
                              f"contains; write the path in backticks instead{note}")
        return
    full = os.path.join(ROOT, path)
    if not os.path.exists(full):
        report(where, number, f"link '{target}': no such file or directory ({path}){note}")
        return
    if anchor and path.endswith(".md") and os.path.isfile(full):
        if anchor not in anchors(path):
            report(where, number, f"link '{target}': no heading with the anchor '#{anchor}' in {path}{note}")


# ---------------------------------------------------------------- paths in backticks

SKIP_CHARS = ("{", "}", "<", ">", "$", "…", "...", "@", "|", "\\")
TRIM_LEAD = "\"'([`"
TRIM_TAIL = "\"'.,;:)]`!?"


def path_words(text: str) -> list[str]:
    return [w for w in re.split(r"[\s=]+", text) if w]


def candidate(word: str, context_dir: str, bare_names: bool) -> str | None:
    """The repository path `word` names, or None when it is not a path."""
    word = word.lstrip(TRIM_LEAD).rstrip(TRIM_TAIL)
    word = re.sub(r"(:\d+(-\d+)?|#L\d+(-L?\d+)?)$", "", word)
    if not word or "://" in word or word.startswith(("/", "~", "-", "./", "../")) or any(s in word for s in SKIP_CHARS):
        return None
    if "/" in word:
        first = word.split("/")[0]
        if first in TOP:
            return norm(word) + ("/" if word.endswith("/") else "")
        if context_dir and norm(os.path.join(context_dir, first)) in DIRS:
            return norm(os.path.join(context_dir, word)) + ("/" if word.endswith("/") else "")
        return None
    if bare_names and word.endswith(BARE_EXTENSIONS) and re.fullmatch(r"[\w.*?-]+", word):
        return "BARE:" + word
    return None


def path_exists(path: str, context_dir: str) -> bool:
    if path.startswith("BARE:"):
        name = path[5:]
        if any(c in name for c in "*?["):
            return any(fnmatch.fnmatch(b, name) for b in BASENAMES)
        return name in BASENAMES or os.path.exists(os.path.join(ROOT, context_dir, name))
    bare = path.rstrip("/")
    if any(c in bare for c in "*?["):
        return bool(glob.glob(os.path.join(ROOT, bare), recursive=True))
    return bare in FILES or bare in DIRS or os.path.exists(os.path.join(ROOT, bare))


def paths(md: str, text: str) -> list[tuple[int, str]]:
    """(line, repository path) of every path-like word in backticks and shell blocks."""
    context_dir = os.path.dirname(md)
    prose, blocks = split_code(blank(text, COMMENT))
    found = []
    for m in CODE_SPAN.finditer(prose):
        for word in path_words(m.group(2)):
            p = candidate(word, context_dir, bare_names=True)
            if p:
                found.append((line_of(prose, m.start()), p))
    for start, lang, body in blocks:
        if lang not in SHELL_LANGUAGES:
            continue
        for offset, line in enumerate(body.split("\n")):
            for word in path_words(line):
                p = candidate(word, context_dir, bare_names=False)
                if p:
                    found.append((start + offset, p))
    return found


def ignored(paths_: list[str]) -> set[str]:
    if not paths_:
        return set()
    out = subprocess.run(["git", "check-ignore", "--stdin", "--no-index"], cwd=ROOT, input="\n".join(paths_) + "\n",
                         capture_output=True, text=True).stdout
    return {line.strip() for line in out.splitlines()}


# ---------------------------------------------------------------- main

def main() -> int:
    markdown = sorted(p for p in FILES if p.endswith(".md"))
    missing_paths: list[tuple[str, int, str]] = []
    for md in markdown:
        text = read(md)
        for number, target in links(text):
            check_link(md, number, md, target)
        for number, path in paths(md, text):
            if not path_exists(path, os.path.dirname(md)):
                missing_paths.append((md, number, path))
        if not md.startswith(BOOK_SRC + "/"):
            continue
        for m in INCLUDE.finditer(text):
            number = line_of(text, m.start())
            target, selector = include_parts(m.group(1))
            resolved = norm(os.path.join(os.path.dirname(md), target))
            if not os.path.isfile(os.path.join(ROOT, resolved)):
                report(md, number, f"{{{{#include {m.group(1)}}}}}: no such file ({resolved})")
                continue
            included = read(resolved)
            part = select(included, selector)
            if part is None:
                report(md, number, f"{{{{#include {m.group(1)}}}}}: no 'ANCHOR: {selector}' in {resolved}")
                continue
            for inner, link in links(part):
                check_link(md, number, md, link,
                           f" (in {resolved}, included here: mdBook does not rewrite links of included files)")
    ignore = ignored([p.rstrip("/") for _, _, p in missing_paths if not p.startswith("BARE:")])
    for md, number, path in missing_paths:
        if path.rstrip("/") in ignore:
            continue
        if path.startswith("BARE:"):
            report(md, number, f"`{path[5:]}`: no file of the repository has this name")
        else:
            report(md, number, f"`{path}`: no such file or directory in the repository")

    if problems:
        print(f"check_docs: {len(problems)} problem(s) in the Markdown:", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print(f"check_docs: {len(markdown)} Markdown files: links, anchors and paths in backticks all resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
