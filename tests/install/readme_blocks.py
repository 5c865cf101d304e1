#!/usr/bin/env python3
"""Turns README.md's fenced code blocks into files and one shell script, run as printed.

The info string after the fence says what a block is:
  c file=NAME, cpp file=NAME, cmake file=NAME  written to NAME (every C and C++ block must;
  py file=NAME                                 a file the tree has must read the same)
  sh                                           a command line, appended to the script
  sh norun, cmake norun                        shown only: not runnable in a test
  text                                         not code (a layout, an output)
Any other block is an error, so that nothing printed goes untested by accident.
Usage: readme_blocks.py README OUTDIR  (writes OUTDIR/NAME... and OUTDIR/readme.sh)
"""
import os
import sys

NEEDS_FILE = {"c", "cpp"}
MAY_NOT_RUN = {"sh", "cmake"}


def blocks(lines):
    """Yields (line number, info words, text) of each fenced block."""
    start, info, body = None, None, []
    for number, line in enumerate(lines, 1):
        if start is None and line.startswith("```"):
            start, info, body = number, line[3:].split(), []
        elif start is not None and line.rstrip() == "```":
            yield start, info, "".join(body)
            start = None
        elif start is not None:
            body.append(line)
    if start is not None:
        sys.exit(f"README line {start}: fence never closed")


def classify(number, info):
    """Returns ('file', NAME), ('run', None) or ('skip', None) for a block's info string."""
    lang = info[0] if info else ""
    attrs = dict(word.split("=", 1) for word in info[1:] if "=" in word)
    flags = {word for word in info[1:] if "=" not in word}
    if "file" in attrs and lang in NEEDS_FILE | {"cmake", "py"}:
        return "file", attrs["file"]
    if lang == "sh" and not flags:
        return "run", None
    if lang == "text" or (lang in MAY_NOT_RUN and flags == {"norun"}):
        return "skip", None
    sys.exit(f"README line {number}: block '```{' '.join(info)}' is neither run, written to a "
             "file, nor marked norun/text (C and C++ blocks need file=NAME)")


def main():
    readme, outdir = sys.argv[1], sys.argv[2]
    with open(readme, encoding="utf-8") as f:
        lines = f.readlines()
    script, written, counts = ["set -ex\n"], set(), {"file": 0, "run": 0, "skip": 0}
    for number, info, text in blocks(lines):
        kind, name = classify(number, info)
        counts[kind] += 1
        if kind == "file":
            if name in written or os.path.isabs(name) or ".." in name.split("/"):
                sys.exit(f"README line {number}: file name {name} repeated or outside the tree")
            written.add(name)
            path = os.path.join(outdir, name)
            if os.path.exists(path) and open(path, encoding="utf-8").read() != text:
                sys.exit(f"README line {number}: {name} differs from the tree's file")
            os.makedirs(os.path.dirname(os.path.join(outdir, name)) or outdir, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        elif kind == "run":
            script.append(f"# README line {number}\n{text}")
    with open(os.path.join(outdir, "readme.sh"), "w", encoding="utf-8") as f:
        f.writelines(script)
    print(f"README blocks: {counts['file']} files, {counts['run']} run, {counts['skip']} shown "
          f"only; files: {' '.join(sorted(written))}")


if __name__ == "__main__":
    main()
